package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/plan"
)

// Regression (found by an early koala soak, seed 3, whose schedule then
// rebalanced the stateless q3-persons): a requested rebalance of tasks
// that had measured no load failed in its plan step with
// InvalidReconfiguration, and that failed the whole run, although the
// refusal changed nothing. Now the request fails and the job goes on: a
// later request for the same operator runs, and the run completes.
func TestRunExperiment_RequestRefusedByPlanFailsOnlyTheRequest(t *testing.T) {
	const refusal = `rebalance of operator "second": its tasks have processed no records yet, so there is no load to plan from (give bucket_load)`
	env := newTestEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "sched"})
	var calls activityLog
	mockExperimentActivities(env, &calls, experimentMocks{job: twoKeyedJob, ackedPerProducer: 10, sink: activities.SinkCounts{Received: 10, Distinct: 10, Tasks: 1}})
	env.RegisterWorkflow(ReconfigureLazy)
	env.OnWorkflow(ReconfigureLazy, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
			if err := workflow.Sleep(ctx, time.Second); err != nil {
				return ReconfigureResult{}, err
			}
			if in.Spec.Type == plan.KindRebalance {
				// As the plan step fails it: an activity error wrapped by
				// the child's own error.
				cause := temporal.NewNonRetryableApplicationError(refusal, "InvalidReconfiguration", nil)
				return ReconfigureResult{}, temporal.NewApplicationErrorWithCause("reconfiguration step plan", "wrapError", cause)
			}
			p, err := plan.Scale(in.Current, in.Spec.TargetOperator, in.Spec.TargetParallelism, in.Workers)
			if err != nil {
				return ReconfigureResult{}, err
			}
			return ReconfigureResult{Deployment: p.New, Steps: []StepTiming{{Step: "plan", Millis: 1}}}, nil
		})
	var refused, later updateResult
	sendUpdate(env, 50*time.Second, "rebalance", ReconfigSpec{Type: plan.KindRebalance, TargetOperator: "second"}, &refused)
	sendUpdate(env, 120*time.Second, "scale", scaleSpec(0, "second", 3), &later)
	env.ExecuteWorkflow(RunExperiment, twoKeyedExperiment(ProtocolLazy))
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "a refused plan must not fail the run")

	require.NoError(t, refused.rejected, "the validator cannot foresee the plan's refusal")
	require.True(t, refused.completed)
	require.Error(t, refused.err, "the request itself fails")
	assert.Contains(t, refused.err.Error(), "its tasks have processed no records yet")

	require.NoError(t, later.rejected, "the operator's lane is free again")
	require.True(t, later.completed)
	require.NoError(t, later.err)
	assert.Equal(t, 3, later.result.Parallelism)

	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, 3, parallelismOf(res.Final, "second"))
	require.NoError(t, plan.Validate(res.Final))
}

// Regression (koala soak --seed 1 --minutes 15, segment 2): a requested
// task migration was in flight when a worker was lost; the recovery
// submitted it again, its plan then refused it (the job had one worker
// left) and that failed the run. A request submitted again after a
// recovery is still a request: its refusal fails only itself.
func TestRunExperiment_RequestResubmittedAfterRecoveryRefusedByPlan(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockExperimentActivities(env, calls, experimentMocks{
		ackedPerProducer: 100, endOffsets: map[int32]int64{0: 100}, sink: activities.SinkCounts{Received: 100, Distinct: 100, Tasks: 1},
		watchAfter: 35 * time.Second, watchErr: workerLostErr("w2", 10*time.Second),
	})
	ckpts := &checkpointMocks{}
	ckpts.register(env, calls)
	runs := 0
	env.RegisterWorkflow(ReconfigureLazy)
	env.OnWorkflow(ReconfigureLazy, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
			runs++
			if runs == 1 {
				// In flight when w2 is lost at 35 s: cancelled.
				err := workflow.Sleep(ctx, 30*time.Second)
				return ReconfigureResult{}, err
			}
			return ReconfigureResult{}, temporal.NewNonRetryableApplicationError(
				`task-migration of operator "mapper": task "mapper-0" cannot move: worker "w1" is the job's only worker`, "InvalidReconfiguration", nil)
		})
	var req updateResult
	// A scale stands in for the soak's task migration (the validator wants
	// two tasks of mapper for one); the plan's refusal is what counts.
	sendUpdate(env, 20*time.Second, "scale", scaleSpec(0, "mapper", 2), &req)
	env.ExecuteWorkflow(RunExperiment, checkpointExperiment())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError(), "the refused re-submission must not fail the run")
	require.NoError(t, req.rejected)
	assert.Equal(t, 2, runs, "the request ran, was cancelled by the loss and was submitted again")
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.NotNil(t, res.Checkpoints)
	require.Len(t, res.Checkpoints.Recoveries, 1)
}
