package experiments

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"koala/dataplane/metrics"
	"koala/workflows"
	"koala/workflows/plan"
)

// artifactRun is fakeRun with the config the run came from: its query (the
// artifact's name in ArtifactQueryName when koala runs it as another).
func artifactRun(query, artifactQuery, kw string, reconfigs ...workflows.ReconfigSpec) RunData {
	r := fakeRun(query+" "+kw, kw, reconfigs...)
	r.Input = &workflows.ExperimentInput{QueryName: query, Params: map[string]string{}}
	if artifactQuery != "" {
		r.Input.Params[ParamArtifactQueryName] = artifactQuery
	}
	return r
}

func TestWriteArtifactFigures(t *testing.T) {
	migrate := workflows.ReconfigSpec{Type: plan.KindTaskMigration, TargetOperator: "counter"}
	skew := artifactRun("taxi", "taxi_skew", "rebalance", rebalance)
	skew.TaskIn = map[string][]metrics.Point{"counter-0": secs(80, 80, 50), "counter-1": secs(20, 20, 50)}
	twitch := artifactRun("twitch", "", "concurrent_multi_reconfig", scaleTo(4), workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "window", TargetParallelism: 3})
	twitch.OperatorIn = []Series{{Label: "counter", Points: secs(1, 2)}, {Label: "window", Points: secs(3, 4)}}
	state5 := artifactRun("nexmark_query6_modified", "", "lazy_5MKeys", scaleTo(4))
	state5.Lookup = secs(5, 6, 7)
	empty := artifactRun("borg", "", "lazy", scaleTo(4))
	empty.Source, empty.Lag, empty.BatchAvg = nil, nil, nil
	runs := []RunData{
		// Section 5.2: azure without its DRRS run; borg without metrics.
		artifactRun("azure", "", "lazy", scaleTo(4)), artifactRun("azure", "", "SAR", scaleTo(4)), artifactRun("azure", "", "Remote", scaleTo(4)),
		empty,
		// Section 5.3 (AWS).
		artifactRun("nexmark_query6_modified", "", "multi_reconfig", scaleTo(3), scaleTo(4)), skew,
		artifactRun("nexmark_query6_modified", "", "task_migration_fetch_on_demand", migrate),
		artifactRun("nexmark_query6_modified", "", "task_migration_progressive_large", migrate),
		twitch,
		// Section 5.4, matched by keyword.
		state5, artifactRun("nexmark_query6_modified", "", "lazy_10MKeys", scaleTo(4)),
		artifactRun("nexmark_query6_modified", "", "lazy_500k_50k_25", scaleTo(4)), artifactRun("nexmark_query6_modified", "", "lazy_2M_200k_0", scaleTo(4)),
	}
	require.Equal(t, "taxi_skew_rebalance", ArtifactLabel(skew), "the artifact's query name makes the result folder")
	require.Equal(t, []string{"11"}, ArtifactFigureData(skew))
	require.Equal(t, []string{"13"}, ArtifactFigureData(twitch))
	require.Equal(t, []string{"15"}, ArtifactFigureData(state5))
	require.Empty(t, ArtifactFigureData(runs[0]))

	dir := t.TempDir()
	paths, notes, err := WriteArtifactFigures(dir, runs)
	require.NoError(t, err)
	var names []string
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		names = append(names, filepath.ToSlash(rel))
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	require.ElementsMatch(t, []string{
		"Figure6/azure.png", "Figure8/azure_latency.png",
		"Figure10.png", "Figure11.png", "Figure12.png", "Figure13.png",
		"Figure14.png", "Figure15.png", "Figure16.png",
	}, names)
	all := strings.Join(notes, "\n")
	for _, want := range []string{
		"Figure6/azure.png: koala Fig 6; drawn without azure_DRRS (not in these results)",
		"Figure6/borg.png: its runs (lazy) have no metrics to draw (koala Fig 6)",
		"Figure10.png: koala Fig 10; sink throughput (the paper's: source)",
		"Figure12.png: koala Fig 12; the variants overlaid, aligned on the migration start (the paper's: one column each); drawn without nexmark_query6_modified_task_migration_progressive_default",
		"Figure15.png: koala Fig 15; panel (a) only",
		"not drawn, their runs are not in these results: Figure6/taxi.png, Figure6/twitch.png",
		"drawn without lazy_1M_100k_25, lazy_2M_200k_25, lazy_4M_400k_25, lazy_2M_200k_50, lazy_2M_200k_75 (not",
	} {
		require.Contains(t, all, want)
	}
	require.NotContains(t, all, "Figure9.png: koala", "no 16→32 run in the results")
	require.Contains(t, all, "Figure9.png", "Figure 9 is listed as not drawn")
}
