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

// A lazy rescale of an operator without keyed state has nothing to hand
// off or migrate (the data plane refuses a handoff on such a task): it
// only swaps the upstreams' routes.
func TestReconfigureLazy_StatelessOperatorOnlySwapsRoutes(t *testing.T) {
	calls, res, err := runLazy(t, initialDeployment(t, "job-1"), 3) // hello mapper keeps no state
	require.NoError(t, err)
	assert.Equal(t, []string{"PlanScale", "DeployTasks", "StartTasks", "SwapRoutes"}, calls.names())
	assert.Equal(t, []string{"plan", "deploy-tasks", "start-tasks", "swap-routes"}, stepNames(res.Steps))
	assert.Equal(t, 3, parallelismOf(res.Deployment, "mapper"))
}

// A stateful operator still goes through the whole protocol.
func TestReconfigureLazy_StatefulOperatorHandsOff(t *testing.T) {
	calls, _, err := runLazy(t, statefulDeployment(t, "job-1", 2, nil), 4)
	require.NoError(t, err)
	assert.Contains(t, calls.names(), "Handoff")
	assert.Contains(t, calls.names(), "AwaitMigration")
}
