package experiments

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"koala/queries"
	"koala/workflows"
)

// The section 5.2 suites over the paper's six queries load, pair every
// query with each protocol once, scale the query's stateful operator 2 → 4
// after state has built up, and fit the scaled time budget.
func TestLoadSuite_Section52Queries(t *testing.T) {
	paper := []string{"q3", "q6mod", "azure", "borg", "taxi", "twitch"}
	for _, tc := range []struct {
		file      string
		protocols []string
		maxSecs   int
	}{
		{"suites/section5_2_queries.json", []string{workflows.ProtocolLazy, workflows.ProtocolStopAndRestart}, 30 * 60},
		{"suites/section5_2_queries_drrs.json", []string{workflows.ProtocolDRRS}, 15 * 60},
		{"suites/section5_2_queries_short.json", []string{workflows.ProtocolLazy, workflows.ProtocolStopAndRestart}, 25 * 60},
	} {
		s, err := LoadSuite(tc.file)
		require.NoError(t, err, tc.file)
		seen := map[string][]string{}
		total := 0
		for _, e := range s.Input.Entries {
			in := e.Input
			seen[in.Name] = append(seen[in.Name], in.ReconfigProtocol)
			require.Len(t, in.Reconfigurations, 1, e.Keyword)
			r := in.Reconfigurations[0]
			require.Equal(t, "scaleup", r.Type, e.Keyword)
			require.Equal(t, 2, in.Parallelism[r.TargetOperator], "%s: initial parallelism of %s", e.Keyword, r.TargetOperator)
			require.Equal(t, 4, r.TargetParallelism, e.Keyword)
			require.GreaterOrEqual(t, r.TriggerTimeSeconds, in.TotalRuntimeSeconds/2, "%s: trigger after state has built up", e.Keyword)
			ops, err := queries.Operators(in.QueryName, in.Parallelism)
			require.NoError(t, err, e.Keyword)
			stateful := false
			for _, op := range ops {
				if op.Name == r.TargetOperator {
					stateful = op.Stateful
				}
			}
			require.True(t, stateful, "%s: %s is a stateful operator of %s", e.Keyword, r.TargetOperator, in.QueryName)
			total += in.TotalRuntimeSeconds + 40 // deploy, drain and metrics per run
		}
		require.ElementsMatch(t, paper, slices.Collect(maps.Keys(seen)), tc.file)
		for name, got := range seen {
			require.ElementsMatch(t, tc.protocols, got, "%s: %s", tc.file, name)
		}
		require.LessOrEqual(t, total, tc.maxSecs, "%s: %d s of runs", tc.file, total)
	}
}
