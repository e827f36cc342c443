package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/plan"
)

// scaleChild completes a scale after d.
func scaleChild(ctx workflow.Context, in ReconfigureInput, d time.Duration) (ReconfigureResult, error) {
	if err := workflow.Sleep(ctx, d); err != nil {
		return ReconfigureResult{}, err
	}
	p, err := plan.Scale(in.Current, in.Spec.TargetOperator, in.Spec.TargetParallelism, in.Workers)
	if err != nil {
		return ReconfigureResult{}, err
	}
	return ReconfigureResult{Deployment: p.New, Steps: []StepTiming{{Step: "plan", Millis: 1}}}, nil
}

// Regression (koala soak): a reconfiguration request sent while the job
// was being recovered from a lost worker was accepted, ran on the job
// being torn down and failed with the cancellation of the run's context
// (or was submitted again by the recovery while its caller had been told
// it failed). The request is now refused with a message that says why and
// what to do; one sent after the recovery runs.
func TestRunExperiment_RequestDuringRecoveryRefused(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockExperimentActivities(env, calls, experimentMocks{
		ackedPerProducer: 100, endOffsets: map[int32]int64{0: 100}, sink: activities.SinkCounts{Received: 100, Distinct: 100, Tasks: 1},
		watchAfter: 35 * time.Second, watchErr: workerLostErr("w2", 10*time.Second), watchOnce: true,
	})
	ckpts := &checkpointMocks{restoreTakes: 20 * time.Second} // recovering from 35 s to 55 s
	ckpts.register(env, calls)
	runs := 0
	env.RegisterWorkflow(ReconfigureLazy)
	env.OnWorkflow(ReconfigureLazy, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
			runs++
			return scaleChild(ctx, in, 5*time.Second)
		})
	var during, after updateResult
	sendUpdate(env, 45*time.Second, "during", scaleSpec(0, "mapper", 2), &during)
	sendUpdate(env, 70*time.Second, "after", scaleSpec(0, "mapper", 2), &after)
	in := checkpointExperiment()
	in.TotalRuntimeSeconds = 120
	env.ExecuteWorkflow(RunExperiment, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Error(t, during.rejected, "a request during the recovery must be refused, not run on the job being torn down")
	assert.Contains(t, during.rejected.Error(), "the job is recovering from the loss of worker w2")
	assert.Contains(t, during.rejected.Error(), "retry after recovery")
	assert.False(t, during.completed)

	require.NoError(t, after.rejected, "after the recovery requests are taken again")
	require.True(t, after.completed)
	require.NoError(t, after.err)
	assert.Equal(t, 2, after.result.Parallelism)
	assert.Equal(t, 1, runs, "only the request after the recovery ran")
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.NotNil(t, res.Checkpoints)
	require.Len(t, res.Checkpoints.Recoveries, 1)
	assert.Len(t, res.Final.TasksOf("mapper"), 2)
}

// Regression (koala soak): a requested reconfiguration cut short by a
// worker loss — its child cancelled by the loss, or failed first because
// the workers it waited on for reports had died — was reported to its
// caller as failed, although the recovery then ran it again. Since
// "request-rerun-after-recovery" the request follows its re-run and
// answers with its outcome.
func TestRunExperiment_RequestCutShortByLossRerunAfterRecovery(t *testing.T) {
	for _, c := range []struct {
		name string
		// first is the interrupted run of the request's child.
		first func(ctx workflow.Context) error
	}{
		// In flight at 35 s. Against a server the loss cancels it and the
		// request failed with the cancellation; the test environment does
		// not cancel a mocked child, so without the marker the request
		// answered with the interrupted run's outcome instead.
		{"in flight at the loss", func(ctx workflow.Context) error {
			return workflow.Sleep(ctx, time.Minute)
		}},
		{"failed on lost worker reports", func(ctx workflow.Context) error {
			if err := workflow.Sleep(ctx, 12*time.Second); err != nil {
				return err
			}
			// At 32 s, before the watch reports w2 lost (35 s).
			return temporal.NewApplicationErrorWithCause("reconfiguration step await-migration", "wrapError",
				errors.New("tasks on w2 did not report: nats: no responders available for request"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := newTestEnv(t)
			calls := &activityLog{}
			mockExperimentActivities(env, calls, experimentMocks{
				ackedPerProducer: 100, endOffsets: map[int32]int64{0: 100}, sink: activities.SinkCounts{Received: 100, Distinct: 100, Tasks: 1},
				watchAfter: 35 * time.Second, watchErr: workerLostErr("w2", 10*time.Second), watchOnce: true,
			})
			ckpts := &checkpointMocks{restoreTakes: 5 * time.Second}
			ckpts.register(env, calls)
			var ids []string
			env.RegisterWorkflow(ReconfigureLazy)
			env.OnWorkflow(ReconfigureLazy, mock.Anything, mock.Anything).Return(
				func(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
					ids = append(ids, in.ReconfigID)
					if len(ids) == 1 {
						return ReconfigureResult{}, c.first(ctx)
					}
					return scaleChild(ctx, in, 5*time.Second)
				})
			var req updateResult
			sendUpdate(env, 20*time.Second, "scale", scaleSpec(0, "mapper", 2), &req)
			in := checkpointExperiment()
			in.TotalRuntimeSeconds = 120
			env.ExecuteWorkflow(RunExperiment, in)
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())

			require.NoError(t, req.rejected)
			require.True(t, req.completed)
			require.NoError(t, req.err, "the request is answered by its re-run, not by the interruption")
			assert.Equal(t, 2, req.result.Parallelism)
			require.Len(t, ids, 2, "the request ran, was cut short by the loss and ran again")
			require.Len(t, req.result.Outcomes, 1)
			assert.Equal(t, ids[1], req.result.Outcomes[0].ID, "the outcome is the re-run's")

			var res ExperimentResult
			require.NoError(t, env.GetWorkflowResult(&res))
			require.NotNil(t, res.Checkpoints)
			require.Len(t, res.Checkpoints.Recoveries, 1)
			assert.Len(t, res.Final.TasksOf("mapper"), 2)
		})
	}
}
