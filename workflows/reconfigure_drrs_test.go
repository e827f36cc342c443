package workflows

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows/plan"
)

// mockDRRSSteps mocks every activity ReconfigureDRRS may call (the
// stop-and-restart ones plus the migration steps), logging each call.
func mockDRRSSteps(env *testsuite.TestWorkflowEnvironment, calls *activityLog, fail map[string]error) {
	mockReconfigureSteps(env, calls, fail)
	env.OnActivity(a.Handoff, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.HandoffInput) (activities.HandoffReport, error) {
			calls.add("Handoff", in, env.Now())
			return activities.HandoffReport{StartedAt: handoffStartedAt}, fail["Handoff"]
		})
	env.OnActivity(a.SwapRoutes, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SwapInput) error {
			calls.add("SwapRoutes", in, env.Now())
			return fail["SwapRoutes"]
		})
	env.OnActivity(a.AwaitMigration, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AwaitMigrationInput) (activities.MigrationReport, error) {
			calls.add("AwaitMigration", in, env.Now())
			return mockMigrationReport(in), fail["AwaitMigration"]
		})
}

// The mocked moves: each eager handoff starts at handoffStartedAt, and each
// await reports mockMovedBytes moved in mockMoveMillis from then (a lazy
// await, without MoveStart, that long of its own).
var handoffStartedAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	mockMovedBytes = 12_300_000
	mockMoveMillis = 160.0
)

// mockMigrationReport answers AwaitMigration the way the activity does:
// a bulk move (MoveStart set) is timed from MoveStart.
func mockMigrationReport(in activities.AwaitMigrationInput) activities.MigrationReport {
	rep := activities.MigrationReport{Bytes: mockMovedBytes, Millis: mockMoveMillis, Since: activities.MoveSinceAwait}
	if !in.MoveStart.IsZero() {
		rep.Since = activities.MoveSinceHandoff
	}
	rep.Summary = activities.MoveSummary(rep.Bytes, rep.Millis, rep.Since == activities.MoveSinceHandoff)
	return rep
}

// statefulDeployment is helloJob with a stateful mapper at parallelism p.
func statefulDeployment(t *testing.T, jobID string, p int, params map[string]string) control.Deployment {
	t.Helper()
	job := helloJob(jobID)
	job.Operators[1].Stateful = true
	job.Operators[1].Parallelism = p
	job.Params = params
	dep, err := plan.Initial(job, testWorkers())
	require.NoError(t, err)
	return dep
}

func runDRRS(t *testing.T, current control.Deployment, target int, fail map[string]error) (*activityLog, ReconfigureResult, error) {
	t.Helper()
	return runReconfigure(t, ReconfigureDRRS, current, target, fail)
}

// runReconfigure runs a reconfiguration workflow that scales the mapper to
// target with every step mocked (mockDRRSSteps), returning its calls.
func runReconfigure(t *testing.T, wf func(workflow.Context, ReconfigureInput) (ReconfigureResult, error), current control.Deployment, target int, fail map[string]error) (*activityLog, ReconfigureResult, error) {
	t.Helper()
	env := newTestEnv(t)
	calls := &activityLog{}
	mockDRRSSteps(env, calls, fail)
	env.ExecuteWorkflow(wf, ReconfigureInput{
		ReconfigID: current.Job.JobID + "-reconfig-1",
		Current:    current,
		Spec:       ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: target},
		Workers:    testWorkers(),
	})
	require.True(t, env.IsWorkflowCompleted())
	var res ReconfigureResult
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&res))
	}
	return calls, res, err
}

func handoffs(t *testing.T, calls *activityLog) []activities.HandoffInput {
	t.Helper()
	var out []activities.HandoffInput
	for _, c := range calls.of("Handoff") {
		out = append(out, c.Input.(activities.HandoffInput))
	}
	return out
}

func swaps(calls *activityLog) []activities.SwapInput {
	var out []activities.SwapInput
	for _, c := range calls.of("SwapRoutes") {
		out = append(out, c.Input.(activities.SwapInput))
	}
	return out
}

func awaits(calls *activityLog) []activities.AwaitMigrationInput {
	var out []activities.AwaitMigrationInput
	for _, c := range calls.of("AwaitMigration") {
		out = append(out, c.Input.(activities.AwaitMigrationInput))
	}
	return out
}

// withEpochsOf returns d with the deployment and routing epochs of ref, so
// two deployments can be compared on tasks and routing alone.
func withEpochsOf(d, ref control.Deployment) control.Deployment {
	d.Epoch = ref.Epoch
	d.Routing = append([]control.RoutingTable(nil), d.Routing...)
	for i := range d.Routing {
		if rt, ok := ref.Table(d.Routing[i].Operator); ok {
			d.Routing[i].Epoch = rt.Epoch
		}
	}
	return d
}

func TestReconfigureDRRS_ScaleOutTwoToFour(t *testing.T) {
	current := statefulDeployment(t, "job-1", 2, nil)
	p, err := plan.Scale(current, "mapper", 4, testWorkers())
	require.NoError(t, err)
	deps, err := plan.Subscales(p, 0)
	require.NoError(t, err)
	require.Len(t, deps, 2)

	calls, res, err := runDRRS(t, current, 4, nil)
	require.NoError(t, err)

	assert.Equal(t, []string{
		"PlanScale", "DeployTasks", "StartTasks",
		"Handoff", "SwapRoutes", "AwaitMigration",
		"UpdateRouting", "Handoff", "SwapRoutes", "AwaitMigration",
	}, calls.names(), "activity order")
	assert.Equal(t, []string{
		"plan", "deploy-tasks", "start-tasks",
		"subscale-1/2-fast-forward", "subscale-1/2-swap-routes", "subscale-1/2-await-migration",
		"subscale-2/2-prepare-owners", "subscale-2/2-fast-forward", "subscale-2/2-swap-routes", "subscale-2/2-await-migration",
	}, stepNames(res.Steps), "Steps")

	// Each subscale's move is a bulk one, timed from its eager handoff.
	require.Len(t, res.Moves, 2)
	for i, m := range res.Moves {
		assert.Equal(t, []string{"subscale-1/2-await-migration", "subscale-2/2-await-migration"}[i], m.Step)
		assert.True(t, m.Bulk, m.Step)
		assert.True(t, awaits(calls)[i].MoveStart.Equal(handoffStartedAt), m.Step)
	}

	// Both new tasks start at once, with D1's routing.
	for _, name := range []string{"DeployTasks", "StartTasks"} {
		got := tasksOf(t, calls.of(name)[0])
		assert.Equal(t, []string{"mapper-2", "mapper-3"}, got.TaskIDs, name)
		assert.Equal(t, deps[0], got.Deployment, name)
	}
	// mapper-3 already runs (with D1) when subscale 2 begins: it must own
	// its new buckets before mapper-1 forwards anything to it.
	prep := tasksOf(t, calls.of("UpdateRouting")[0])
	assert.Equal(t, []string{"mapper-3"}, prep.TaskIDs)
	assert.Equal(t, deps[1], prep.Deployment)
	assert.Equal(t, "subscale-2/2-prepare-owners", prep.Step.Step)

	// Each subscale hands over exactly its own pair, eagerly, D(i-1) → Di.
	hs := handoffs(t, calls)
	require.Len(t, hs, 2)
	assert.Equal(t, []activities.OwnerPair{{From: "mapper-0", To: "mapper-2"}}, hs[0].Pairs)
	assert.Equal(t, []activities.OwnerPair{{From: "mapper-1", To: "mapper-3"}}, hs[1].Pairs)
	assert.Equal(t, current, hs[0].Previous)
	assert.Equal(t, deps[0], hs[0].Deployment)
	assert.Equal(t, deps[0], hs[1].Previous)
	assert.Equal(t, deps[1], hs[1].Deployment)
	for i, h := range hs {
		assert.True(t, h.Eager, "handoff %d is eager", i+1)
	}
	sw := swaps(calls)
	require.Len(t, sw, 2)
	assert.Equal(t, []string{"mapper-0"}, sw[0].OldOwners)
	assert.Equal(t, []string{"mapper-1"}, sw[1].OldOwners)
	assert.Equal(t, current, sw[0].Previous)
	assert.Equal(t, deps[1], sw[1].Deployment)
	assert.Equal(t, "mapper", sw[1].TargetOperator)
	aw := awaits(calls)
	require.Len(t, aw, 2)
	assert.Equal(t, []string{"mapper-2"}, aw[0].Tasks)
	assert.Equal(t, []string{"mapper-3"}, aw[1].Tasks)
	assert.Equal(t, "subscale-2/2-await-migration", aw[1].Step.Step)
	assert.Equal(t, ProtocolDRRS, aw[1].Step.Protocol)

	// D1: mapper-2 has its buckets, mapper-1 still owns all of its own.
	d1, _ := deps[0].Table("mapper")
	oldTable, _ := current.Table("mapper")
	for b, owner := range d1.Buckets {
		if oldTable.Buckets[b] == 1 {
			assert.Equal(t, 1, owner, "bucket %d moves only in subscale 2", b)
		}
	}

	assert.Empty(t, calls.of("StopTasks"), "scale-out stops no task")
	dep := res.Deployment
	require.NoError(t, plan.Validate(dep))
	assert.Equal(t, deps[1], dep, "the result is the last subscale's deployment")
	assert.Equal(t, p.New, withEpochsOf(dep, p.New), "which is the plan's new deployment")
	assert.Equal(t, current.Epoch+2, dep.Epoch, "one epoch per subscale")
	newTable, _ := dep.Table("mapper")
	assert.Equal(t, oldTable.Epoch+2, newTable.Epoch)
}

func TestReconfigureDRRS_ScaleInFourToTwo(t *testing.T) {
	current := statefulDeployment(t, "job-1", 4, nil)
	p, err := plan.Scale(current, "mapper", 2, testWorkers())
	require.NoError(t, err)
	deps, err := plan.Subscales(p, 0)
	require.NoError(t, err)
	require.Len(t, deps, 2)

	calls, res, err := runDRRS(t, current, 2, nil)
	require.NoError(t, err)

	assert.Equal(t, []string{
		"PlanScale",
		"UpdateRouting", "Handoff", "SwapRoutes", "AwaitMigration",
		"UpdateRouting", "Handoff", "SwapRoutes", "AwaitMigration",
		"StopTasks",
	}, calls.names(), "activity order")
	assert.Equal(t, []string{
		"plan",
		"subscale-1/2-prepare-owners", "subscale-1/2-fast-forward", "subscale-1/2-swap-routes", "subscale-1/2-await-migration",
		"subscale-2/2-prepare-owners", "subscale-2/2-fast-forward", "subscale-2/2-swap-routes", "subscale-2/2-await-migration",
		"stop-tasks",
	}, stepNames(res.Steps), "Steps")

	preps := calls.of("UpdateRouting")
	assert.Equal(t, []string{"mapper-0"}, tasksOf(t, preps[0]).TaskIDs)
	assert.Equal(t, deps[0], tasksOf(t, preps[0]).Deployment)
	assert.Equal(t, []string{"mapper-1"}, tasksOf(t, preps[1]).TaskIDs)
	assert.Equal(t, deps[1], tasksOf(t, preps[1]).Deployment)

	hs := handoffs(t, calls)
	require.Len(t, hs, 2)
	assert.Equal(t, []activities.OwnerPair{{From: "mapper-2", To: "mapper-0"}}, hs[0].Pairs)
	assert.Equal(t, []activities.OwnerPair{{From: "mapper-3", To: "mapper-1"}}, hs[1].Pairs)
	// The removed tasks are still in D1, so the old owner of subscale 2
	// can be found in its Previous deployment.
	assert.Len(t, hs[1].Previous.TasksOf("mapper"), 4)
	assert.Equal(t, deps[0], hs[1].Previous)
	sw := swaps(calls)
	assert.Equal(t, []string{"mapper-2"}, sw[0].OldOwners)
	assert.Equal(t, []string{"mapper-3"}, sw[1].OldOwners)
	aw := awaits(calls)
	assert.Equal(t, []string{"mapper-0"}, aw[0].Tasks)
	assert.Equal(t, []string{"mapper-1"}, aw[1].Tasks)

	stop := tasksOf(t, calls.of("StopTasks")[0])
	assert.Equal(t, []string{"mapper-2", "mapper-3"}, stop.TaskIDs)
	assert.Equal(t, current, stop.Deployment, "removed tasks are located in the old deployment")
	assert.Equal(t, len(calls.names())-1, calls.index("StopTasks"), "tasks stop only after the last subscale")

	require.NoError(t, plan.Validate(res.Deployment))
	assert.Equal(t, deps[1], res.Deployment)
	assert.Equal(t, p.New, withEpochsOf(res.Deployment, p.New))
	assert.Len(t, res.Deployment.TasksOf("mapper"), 2)
}

func TestReconfigureDRRS_NumSubscalesMergesPairs(t *testing.T) {
	current := statefulDeployment(t, "job-1", 1, map[string]string{control.ParamNumSubscales: "2"})
	calls, res, err := runDRRS(t, current, 4, nil) // pairs 0→1, 0→2, 0→3
	require.NoError(t, err)

	hs := handoffs(t, calls)
	require.Len(t, hs, 2)
	assert.Equal(t, []activities.OwnerPair{{From: "mapper-0", To: "mapper-1"}, {From: "mapper-0", To: "mapper-2"}}, hs[0].Pairs)
	assert.Equal(t, []activities.OwnerPair{{From: "mapper-0", To: "mapper-3"}}, hs[1].Pairs)
	aw := awaits(calls)
	assert.Equal(t, []string{"mapper-1", "mapper-2"}, aw[0].Tasks)
	assert.Equal(t, []string{"mapper-3"}, aw[1].Tasks)
	sw := swaps(calls)
	assert.Equal(t, []string{"mapper-0"}, sw[0].OldOwners, "a source is listed once")
	assert.Contains(t, stepNames(res.Steps), "subscale-2/2-swap-routes")
	assert.Len(t, res.Deployment.TasksOf("mapper"), 4)
}

func TestReconfigureDRRS_BadNumSubscales(t *testing.T) {
	current := statefulDeployment(t, "job-1", 2, map[string]string{control.ParamNumSubscales: "many"})
	calls, _, err := runDRRS(t, current, 4, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NumSubscales")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	assert.Equal(t, "BadConfig", appErr.Type())
	assert.Equal(t, []string{"PlanScale"}, calls.names(), "no task is touched")
}

func TestReconfigureDRRS_StatelessOperatorOnlySwapsRoutes(t *testing.T) {
	calls, res, err := runDRRS(t, initialDeployment(t, "job-1"), 3, nil) // hello mapper keeps no state
	require.NoError(t, err)
	assert.Equal(t, []string{"PlanScale", "DeployTasks", "StartTasks", "Handoff", "SwapRoutes", "Handoff", "SwapRoutes"}, calls.names())
	assert.Equal(t, []string{"plan", "deploy-tasks", "start-tasks", "subscale-1/2-fast-forward", "subscale-1/2-swap-routes", "subscale-2/2-fast-forward", "subscale-2/2-swap-routes"}, stepNames(res.Steps))
	for _, h := range handoffs(t, calls) {
		assert.True(t, h.Ordered, "each subscale keeps per-key order")
	}
}

// Every DRRS subscale of a stateful operator gates its new owners: DRRS
// swaps routes in band while old owners still forward.
func TestReconfigureDRRS_HandoffsAreOrdered(t *testing.T) {
	calls, _, err := runDRRS(t, statefulDeployment(t, "job-1", 2, nil), 4, nil)
	require.NoError(t, err)
	hs := handoffs(t, calls)
	require.NotEmpty(t, hs)
	for _, h := range hs {
		assert.True(t, h.Ordered && h.Eager, "subscale %v: ordered %v eager %v", h.Pairs, h.Ordered, h.Eager)
	}
}

func TestReconfigureDRRS_HandoffFailureStops(t *testing.T) {
	current := statefulDeployment(t, "job-1", 2, nil)
	calls, _, err := runDRRS(t, current, 4, map[string]error{
		"Handoff": temporal.NewNonRetryableApplicationError("task mapper-0: boom", "InvalidReconfiguration", nil),
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "step subscale-1/2-fast-forward")
	assert.Contains(t, err.Error(), "boom")
	assert.Empty(t, calls.of("SwapRoutes"), "routes are not swapped after a failed handoff")
	assert.Len(t, calls.of("Handoff"), 1)
}

func TestChildForDRRS(t *testing.T) {
	child, err := childFor(ProtocolDRRS)
	require.NoError(t, err)
	assert.Equal(t, reflect.ValueOf(ReconfigureDRRS).Pointer(), reflect.ValueOf(child).Pointer())
}
