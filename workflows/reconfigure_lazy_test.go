package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"koala/dataplane/control"
)

func runLazy(t *testing.T, current control.Deployment, target int) (*activityLog, ReconfigureResult, error) {
	t.Helper()
	return runReconfigure(t, ReconfigureLazy, current, target, nil)
}

// A lazy rescale of an operator without keyed state has no state to hand
// off or migrate: an ordered handoff (the order alone, so new owners hold
// direct records until old owners drained) and the route swap are all.
func TestReconfigureLazy_StatelessOperatorOnlySwapsRoutes(t *testing.T) {
	calls, res, err := runLazy(t, initialDeployment(t, "job-1"), 3) // hello mapper keeps no state
	require.NoError(t, err)
	assert.Equal(t, []string{"PlanScale", "DeployTasks", "StartTasks", "Handoff", "SwapRoutes"}, calls.names())
	assert.Equal(t, []string{"plan", "deploy-tasks", "start-tasks", "fast-forward", "swap-routes"}, stepNames(res.Steps))
	hs := handoffs(t, calls)
	require.Len(t, hs, 1)
	assert.True(t, hs[0].Ordered, "the handoff keeps per-key order")
	assert.False(t, hs[0].Eager, "nothing to migrate")
	assert.Equal(t, 3, parallelismOf(res.Deployment, "mapper"))
}

// A stateful operator still goes through the whole protocol.
func TestReconfigureLazy_StatefulOperatorHandsOff(t *testing.T) {
	calls, res, err := runLazy(t, statefulDeployment(t, "job-1", 2, nil), 4)
	require.NoError(t, err)
	assert.Contains(t, calls.names(), "Handoff")
	assert.Contains(t, calls.names(), "AwaitMigration")
	// Values move lazily while records flow: the await reports the bytes
	// and its own time, not a bulk move with a rate.
	require.Len(t, awaits(calls), 1)
	assert.True(t, awaits(calls)[0].MoveStart.IsZero())
	require.Len(t, res.Moves, 1)
	assert.False(t, res.Moves[0].Bulk)
	assert.Equal(t, "12.3 MB migrated, await 0.16 s", res.Moves[0].Summary)
	_, ok := res.Moves[0].MBPerSec()
	assert.False(t, ok, "no rate for a lazy move")
}
