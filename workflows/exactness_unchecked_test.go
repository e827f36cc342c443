package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"koala/activities"
)

// TestRunExperimentLedgerUncheckedQuery: for a query whose sink does not get
// each input record once (a filter or an aggregate), the run reports why the
// sink ledger cannot check it instead of counting every filtered or
// aggregated record as lost.
func TestRunExperimentLedgerUncheckedQuery(t *testing.T) {
	for _, tc := range []struct {
		name      string
		unchecked string
		wantLost  int64
	}{
		{name: "pass-through query is checked", wantLost: 900},
		{name: "aggregating query is not", unchecked: "it aggregates", wantLost: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			var calls activityLog
			mockExperimentActivities(env, &calls, experimentMocks{
				ackedPerProducer: 1000, unchecked: tc.unchecked,
				sink: activities.SinkCounts{Received: 100, Distinct: 100, Tasks: 1},
			})
			in := helloExperiment()
			in.Reconfigurations = nil
			env.ExecuteWorkflow(RunExperiment, in)
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res ExperimentResult
			require.NoError(t, env.GetWorkflowResult(&res))
			assert.Equal(t, tc.wantLost, res.Lost)
			assert.Equal(t, tc.unchecked, res.ExactnessUnchecked)
			assert.Equal(t, uint64(100), res.Sink.Received, "the sink's counts are reported either way")
		})
	}
}
