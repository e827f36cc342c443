package workflows

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"koala/activities"
	"koala/workflows/plan"
)

// mockReconfigureSteps mocks every activity ReconfigureStopAndRestart may
// call. Each mock records its call; PlanScale runs the real planner. An
// activity named in fail returns that error on every attempt.
func mockReconfigureSteps(env *testsuite.TestWorkflowEnvironment, calls *activityLog, fail map[string]error) {
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.PlanScale, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PlanInput) (plan.Plan, error) {
			calls.add("PlanScale", in, env.Now())
			if err := fail["PlanScale"]; err != nil {
				return plan.Plan{}, err
			}
			return planScaleAsActivity(in)
		})
	env.OnActivity(a.PauseAndDrain, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DrainInput) (activities.DrainReport, error) {
			calls.add("PauseAndDrain", in, env.Now())
			return activities.DrainReport{Millis: 12}, fail["PauseAndDrain"]
		})
	tasksStep := func(name string) func(context.Context, activities.TasksInput) error {
		return func(_ context.Context, in activities.TasksInput) error {
			calls.add(name, in, env.Now())
			return fail[name]
		}
	}
	env.OnActivity(a.DeployTasks, mock.Anything, mock.Anything).Return(tasksStep("DeployTasks"))
	env.OnActivity(a.StartTasks, mock.Anything, mock.Anything).Return(tasksStep("StartTasks"))
	env.OnActivity(a.UpdateRouting, mock.Anything, mock.Anything).Return(tasksStep("UpdateRouting"))
	env.OnActivity(a.StopTasks, mock.Anything, mock.Anything).Return(tasksStep("StopTasks"))
	env.OnActivity(a.ResumeSources, mock.Anything, mock.Anything).Return(tasksStep("ResumeSources"))
}

func TestReconfigureStopAndRestart_ScaleOut(t *testing.T) {
	env := newTestEnv(t)
	var calls activityLog
	mockReconfigureSteps(env, &calls, nil)

	current := initialDeployment(t, "job-1")
	in := ReconfigureInput{
		ReconfigID: "job-1-reconfig-1",
		Current:    current,
		Spec:       ReconfigSpec{TriggerTimeSeconds: 30, Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: 2},
		Workers:    testWorkers(),
	}
	env.ExecuteWorkflow(ReconfigureStopAndRestart, in)

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ReconfigureResult
	require.NoError(t, env.GetWorkflowResult(&res))

	assert.Equal(t,
		[]string{"PlanScale", "PauseAndDrain", "DeployTasks", "StartTasks", "UpdateRouting", "ResumeSources"},
		calls.names(), "activity order")
	assert.Equal(t,
		[]string{"plan", "pause-and-drain", "deploy-tasks", "start-tasks", "update-routing", "resume"},
		stepNames(res.Steps), "Steps")

	// The pause acts on the running deployment behind the reconfiguration's barrier.
	drain := calls.of("PauseAndDrain")[0].Input.(activities.DrainInput)
	assert.Equal(t, current, drain.Deployment)
	assert.Equal(t, in.ReconfigID, drain.BarrierID)

	// Only the new task is deployed and started, with the new deployment.
	for _, name := range []string{"DeployTasks", "StartTasks"} {
		calls := calls.of(name)
		require.Len(t, calls, 1, name)
		got := tasksOf(t, calls[0])
		assert.Equal(t, []string{"mapper-1"}, got.TaskIDs, name)
		assert.Equal(t, 2, parallelismOf(got.Deployment, "mapper"), name)
	}
	// Routing and resume use the new deployment for all tasks.
	for _, name := range []string{"UpdateRouting", "ResumeSources"} {
		got := tasksOf(t, calls.of(name)[0])
		assert.Empty(t, got.TaskIDs, name)
		assert.Equal(t, res.Deployment, got.Deployment, name)
	}
	assert.Empty(t, calls.of("StopTasks"), "scale-out stops no task")

	dep := res.Deployment
	require.NoError(t, plan.Validate(dep))
	mappers := dep.TasksOf("mapper")
	require.Len(t, mappers, 2)
	assert.Equal(t, []string{"mapper-0", "mapper-1"}, []string{mappers[0].ID, mappers[1].ID})
	assert.Equal(t, current.Tasks[1], mappers[0], "the existing mapper task stays where it was")
	assert.Equal(t, current.Epoch+1, dep.Epoch, "deployment epoch")
	oldTable, _ := current.Table("mapper")
	newTable, _ := dep.Table("mapper")
	assert.Equal(t, oldTable.Epoch+1, newTable.Epoch, "mapper routing epoch")
	assert.Contains(t, newTable.Buckets, 1, "the new task owns buckets")
}

func TestReconfigureStopAndRestart_ScaleIn(t *testing.T) {
	env := newTestEnv(t)
	var calls activityLog
	mockReconfigureSteps(env, &calls, nil)

	out, err := plan.Scale(initialDeployment(t, "job-1"), "mapper", 2, testWorkers())
	require.NoError(t, err)
	current := out.New
	env.ExecuteWorkflow(ReconfigureStopAndRestart, ReconfigureInput{
		ReconfigID: "job-1-reconfig-2",
		Current:    current,
		Spec:       ReconfigSpec{Type: plan.KindScaleDown, TargetOperator: "mapper", TargetParallelism: 1},
		Workers:    testWorkers(),
	})

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ReconfigureResult
	require.NoError(t, env.GetWorkflowResult(&res))

	assert.Equal(t,
		[]string{"PlanScale", "PauseAndDrain", "UpdateRouting", "StopTasks", "ResumeSources"},
		calls.names(), "activity order")
	routing, stop, resume := calls.index("UpdateRouting"), calls.index("StopTasks"), calls.index("ResumeSources")
	assert.Less(t, routing, stop, "tasks are stopped only after the routing no longer points at them")
	assert.Less(t, stop, resume, "tasks are stopped before the sources resume")

	stopped := tasksOf(t, calls.of("StopTasks")[0])
	assert.Equal(t, []string{"mapper-1"}, stopped.TaskIDs)
	// The removed task is only in the old deployment, so that is where the
	// activity can find its worker.
	assert.Equal(t, current, stopped.Deployment)

	assert.Equal(t,
		[]string{"plan", "pause-and-drain", "update-routing", "stop-tasks", "resume"},
		stepNames(res.Steps), "Steps")
	require.NoError(t, plan.Validate(res.Deployment))
	assert.Len(t, res.Deployment.TasksOf("mapper"), 1)
	assert.Equal(t, current.Epoch+1, res.Deployment.Epoch)
}

func TestReconfigureStopAndRestart_InvalidRequest(t *testing.T) {
	for _, tc := range []struct {
		name     string
		operator string
		target   int
		wantMsg  string
	}{
		{"parallelism 0", "mapper", 0, `target parallelism 0 for operator "mapper"`},
		{"unknown operator", "nope", 2, `operator "nope" not found`},
		{"source operator", "source", 2, `operator "source" is a source`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			var calls activityLog
			mockReconfigureSteps(env, &calls, nil)

			env.ExecuteWorkflow(ReconfigureStopAndRestart, ReconfigureInput{
				ReconfigID: "job-1-reconfig-1",
				Current:    initialDeployment(t, "job-1"),
				Spec:       ReconfigSpec{TargetOperator: tc.operator, TargetParallelism: tc.target},
				Workers:    testWorkers(),
			})

			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantMsg)
			assert.Contains(t, err.Error(), "step plan")
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "want an ApplicationError in %v", err)
			assert.Equal(t, []string{"PlanScale"}, calls.names(),
				"an invalid request is not retried and touches no task: nothing is paused")
			env.AssertActivityNotCalled(t, "PauseAndDrain", mock.Anything, mock.Anything)
		})
	}
}

func TestReconfigureStopAndRestart_StartFailureResumesOldDeployment(t *testing.T) {
	env := newTestEnv(t)
	var calls activityLog
	mockReconfigureSteps(env, &calls, map[string]error{
		"StartTasks": errors.New("worker w1: start mapper-1: no such operator kind"),
	})

	current := initialDeployment(t, "job-1")
	env.ExecuteWorkflow(ReconfigureStopAndRestart, ReconfigureInput{
		ReconfigID: "job-1-reconfig-1",
		Current:    current,
		Spec:       ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: 2},
		Workers:    testWorkers(),
	})

	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "step start-tasks")
	assert.Contains(t, err.Error(), "no such operator kind")

	resumes := calls.of("ResumeSources")
	require.Len(t, resumes, 1, "the sources are resumed exactly once")
	resumed := tasksOf(t, resumes[0])
	assert.Equal(t, current, resumed.Deployment, "compensation resumes the OLD deployment")
	assert.Equal(t, "compensate-resume", resumed.Step.Step)
	assert.Greater(t, calls.index("ResumeSources"), calls.index("StartTasks"))
	assert.Empty(t, calls.of("UpdateRouting"), "the new routing is never installed")
	assert.Empty(t, calls.of("StopTasks"))
	for _, c := range calls.of("StartTasks") {
		assert.Equal(t, []string{"mapper-1"}, tasksOf(t, c).TaskIDs)
	}
}

func TestReconfigureStopAndRestart_CompensationFailureReportsBoth(t *testing.T) {
	env := newTestEnv(t)
	var calls activityLog
	mockReconfigureSteps(env, &calls, map[string]error{
		"DeployTasks":   temporal.NewNonRetryableApplicationError("worker w1 has no slot", "BadConfig", nil),
		"ResumeSources": errors.New("worker w1 does not answer resume"),
	})

	env.ExecuteWorkflow(ReconfigureStopAndRestart, ReconfigureInput{
		ReconfigID: "job-1-reconfig-1",
		Current:    initialDeployment(t, "job-1"),
		Spec:       ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: 2},
		Workers:    testWorkers(),
	})

	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worker w1 has no slot", "the original cause")
	assert.Contains(t, err.Error(), "compensation failed too", "and the failed compensation")
	assert.Empty(t, calls.of("StartTasks"))
	assert.NotEmpty(t, calls.of("ResumeSources"))
}

// TestReconfigureStopAndRestart_ReportsStateMove: a stateful scale-out
// moves keyed state while the sources are paused. The eager handoff's
// start reaches the await as MoveStart, and the result carries the bytes
// and the duration of the move the await measured (from that start to the
// last new owner's "migrated" event), so its rate; the Temporal UI shows
// the same line as the workflow's current details.
func TestReconfigureStopAndRestart_ReportsStateMove(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockDRRSSteps(env, calls, nil)

	env.ExecuteWorkflow(ReconfigureStopAndRestart, ReconfigureInput{
		ReconfigID: "job-1-reconfig-1",
		Current:    statefulDeployment(t, "job-1", 1, nil),
		Spec:       ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: 2},
		Workers:    testWorkers(),
	})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ReconfigureResult
	require.NoError(t, env.GetWorkflowResult(&res))

	assert.Equal(t,
		[]string{"plan", "pause-and-drain", "deploy-tasks", "start-tasks", "move-state", "await-migration", "update-routing", "resume"},
		stepNames(res.Steps), "Steps")
	hs := handoffs(t, calls)
	require.Len(t, hs, 1)
	assert.True(t, hs[0].Eager, "the state moves in bulk")
	aws := awaits(calls)
	require.Len(t, aws, 1)
	assert.True(t, aws[0].MoveStart.Equal(handoffStartedAt), "the move is timed from the handoff's start, got %v", aws[0].MoveStart)
	assert.Equal(t, []string{"mapper-1"}, aws[0].Tasks)

	require.Len(t, res.Moves, 1)
	assert.Equal(t, StateMove{
		Step: "await-migration", Bytes: mockMovedBytes, Millis: mockMoveMillis, Bulk: true,
		Summary: "12.3 MB in 0.16 s (77 MB/s)",
	}, res.Moves[0])
	rate, ok := res.Moves[0].MBPerSec()
	assert.True(t, ok)
	assert.InDelta(t, 12.3/0.16, rate, 1e-9, "MB/s")

	details := currentDetails(t, env)
	assert.Contains(t, details, "- await-migration: 12.3 MB in 0.16 s (77 MB/s)")
	assert.Contains(t, details, "eager handoff start → last new owner migrated")
}

// A stateless or remote-state rescale moves no state: no Moves.
func TestReconfigureStopAndRestart_StatelessMovesNothing(t *testing.T) {
	calls, res, err := runReconfigure(t, ReconfigureStopAndRestart, initialDeployment(t, "job-1"), 2, nil)
	require.NoError(t, err)
	assert.Empty(t, calls.of("AwaitMigration"))
	assert.Empty(t, res.Moves)
}

// currentDetails is what the Temporal UI shows as the workflow's current
// details (workflow.SetCurrentDetails), read the way the UI reads it.
func currentDetails(t *testing.T, env *testsuite.TestWorkflowEnvironment) string {
	t.Helper()
	v, err := env.QueryWorkflow("__temporal_workflow_metadata")
	require.NoError(t, err)
	var md sdkpb.WorkflowMetadata
	require.NoError(t, v.Get(&md))
	return md.GetCurrentDetails()
}
