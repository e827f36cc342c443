package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"koala/activities"
	"koala/workflows/plan"
)

// migrationDuration is how long the mocked AwaitMigration takes: an
// eventual migration far longer than the checkpoint interval.
const migrationDuration = 90 * time.Second

// mockLazySteps mocks the activities of ReconfigureLazy beyond the ones
// mockExperimentActivities answers; AwaitMigration takes migrationDuration.
func mockLazySteps(env *testsuite.TestWorkflowEnvironment, calls *activityLog) {
	env.RegisterWorkflow(ReconfigureLazy)
	env.OnActivity(a.PlanScale, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PlanInput) (plan.Plan, error) {
			calls.add("PlanScale", in, env.Now())
			return planScaleAsActivity(in)
		})
	env.OnActivity(a.UpdateRouting, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TasksInput) error {
			calls.add("UpdateRouting", in, env.Now())
			return nil
		})
	env.OnActivity(a.Handoff, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.HandoffInput) (activities.HandoffReport, error) {
			calls.add("Handoff", in, env.Now())
			return activities.HandoffReport{StartedAt: env.Now()}, nil
		})
	env.OnActivity(a.SwapRoutes, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SwapInput) error {
			calls.add("SwapRoutes", in, env.Now())
			return nil
		})
	env.OnActivity(a.AwaitMigration, mock.Anything, mock.Anything).After(migrationDuration).Return(
		func(_ context.Context, in activities.AwaitMigrationInput) (activities.MigrationReport, error) {
			calls.add("AwaitMigration", in, env.Now())
			return activities.MigrationReport{Bytes: 42}, nil
		})
}

// TestCheckpointsDuringLongMigration: a lazy scale-out of "first" at 30 s
// under eventual migration spends migrationDuration in its migration step.
// No checkpoint starts between its start and its routing swap; once the
// swap is reported, checkpoints are taken of the new deployment while the
// child is still migrating (seen mid-migration by a delayed callback), and
// the run completes with the scale-out.
func TestCheckpointsDuringLongMigration(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockExperimentActivities(env, calls, experimentMocks{job: twoKeyedJob, ackedPerProducer: 10, sink: activities.SinkCounts{Received: 10, Distinct: 10, Tasks: 1}})
	ckpts := &checkpointMocks{}
	ckpts.register(env, calls)
	mockLazySteps(env, calls)
	in := twoKeyedExperiment(ProtocolLazy, scaleSpec(30, "first", 3))
	in.TotalRuntimeSeconds = 200
	in.CheckpointIntervalSeconds = 10

	// 60 s after the trigger the migration (which began right after the
	// swap) is still running: checkpoints of the new deployment must have
	// completed by then.
	midMigration := -1
	env.RegisterDelayedCallback(func() {
		midMigration = 0
		for _, c := range ckpts.completedSnapshot() {
			if len(c.Deployment.TasksOf("first")) == 3 {
				midMigration++
			}
		}
		assert.Empty(t, calls.of("AwaitMigration"), "the mocked migration ended before the mid-migration check")
	}, 90*time.Second)

	env.ExecuteWorkflow(RunExperiment, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))

	assert.GreaterOrEqual(t, midMigration, 2, "checkpoints of the new deployment completed while the migration ran")
	plans, swaps, awaits := calls.of("PlanScale"), calls.of("SwapRoutes"), calls.of("AwaitMigration")
	require.Len(t, plans, 1)
	require.Len(t, swaps, 1)
	require.Len(t, awaits, 1)
	migrationEnd := awaits[0].At // the mock logs when it returns
	var during int
	for _, c := range calls.of("InjectCheckpoint") {
		dep := c.Input.(activities.CheckpointInput).Deployment
		if !c.At.Before(plans[0].At) && c.At.Before(swaps[0].At) {
			t.Errorf("checkpoint injected at %s, between the reconfiguration's start (%s) and its routing swap (%s)", c.At, plans[0].At, swaps[0].At)
		}
		if c.At.After(swaps[0].At) && c.At.Before(migrationEnd) {
			during++
			assert.Len(t, dep.TasksOf("first"), 3, "a checkpoint after the swap is of the new deployment")
		}
	}
	assert.GreaterOrEqual(t, during, 5, "checkpoints during the %s migration", migrationDuration)
	require.NotNil(t, res.Checkpoints)
	assert.Zero(t, res.Checkpoints.Failed)
	assert.Len(t, res.Final.TasksOf("first"), 3)
}

// TestReconfigsGoOnAfterRecovery: "first" scales 2→3 from 20 s (a mocked
// child of 60 s), w2 is lost at 35 s, and "second" is scheduled at 100 s.
// The recovery (from the checkpoint at 10 s, before the scale-out)
// cancels the running child; the scheduler then re-plans "first" from the
// recovered deployment at once and runs "second" at its trigger time, and
// the run ends with both.
func TestReconfigsGoOnAfterRecovery(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockExperimentActivities(env, calls, experimentMocks{
		job: twoKeyedJob, ackedPerProducer: 10, sink: activities.SinkCounts{Received: 10, Distinct: 10, Tasks: 1},
		watchAfter: 35 * time.Second, watchErr: workerLostErr("w2", 10*time.Second), watchOnce: true,
	})
	ckpts := &checkpointMocks{}
	ckpts.register(env, calls)
	children := &mockedChildren{}
	children.register(env, ReconfigureLazy)
	in := twoKeyedExperiment(ProtocolLazy, scaleSpec(20, "first", 3), scaleSpec(100, "second", 3))
	in.TotalRuntimeSeconds = 200
	in.CheckpointIntervalSeconds = 10
	env.ExecuteWorkflow(RunExperiment, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.NotNil(t, res.Checkpoints)
	require.Len(t, res.Checkpoints.Recoveries, 1)
	restores := calls.of("RestoreCheckpoint")
	require.Len(t, restores, 1)
	recoveredAt := restores[0].At

	// The mocked child does not observe its cancellation, so the
	// interrupted run is logged too; the re-planned one is the last.
	first, second := children.byOperator("first"), children.byOperator("second")
	require.NotEmpty(t, first)
	rerun := first[len(first)-1]
	assert.True(t, first[0].start.Before(recoveredAt), "first's original run started before the loss")
	assert.False(t, rerun.start.Before(recoveredAt), "first re-planned after the recovery (%s), started %s", recoveredAt, rerun.start)
	assert.NotEqual(t, first[0].in.ReconfigID, rerun.in.ReconfigID, "the re-run has its own id")
	assert.Len(t, rerun.in.Current.TasksOf("first"), 2, "first is planned from the recovered deployment (the checkpoint predates it)")
	for _, task := range rerun.in.Current.Tasks {
		assert.NotEqual(t, "w2", task.WorkerID, "planned from a deployment with a task on the lost worker")
	}
	require.Len(t, second, 1)
	assert.Equal(t, 100*time.Second, second[0].start.Sub(res.StartedAt).Round(time.Second), "second runs at its trigger time")
	assert.Len(t, res.Final.TasksOf("first"), 3)
	assert.Len(t, res.Final.TasksOf("second"), 3)
	require.Len(t, res.Reconfigs, 3, "the cancelled run, its re-run and second")
	assert.Equal(t, "first", res.Reconfigs[1].Spec.TargetOperator)
}
