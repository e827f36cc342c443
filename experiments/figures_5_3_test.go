package experiments

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"koala/dataplane/metrics"
	"koala/workflows"
	"koala/workflows/plan"
)

// secs is a series with vals[i] at second i.
func secs(vals ...float64) []metrics.Point { return pts(0, vals...) }

func TestReconfigWindows(t *testing.T) {
	// 40 s of sink at 100/s with a dip to 20 at s=12 and to 0 at s=31;
	// bytes at 10..13 and 30..31.
	sink := secs(slices.Repeat([]float64{100}, 40)...)
	sink[12].Value, sink[31].Value = 20, 0
	bytes := secs(slices.Repeat([]float64{0}, 40)...)
	for _, s := range []int{10, 11, 12, 30, 31} {
		bytes[s].Value = 3000
	}
	bytes[13].Value = 100 // a thin tail: 90 % had moved after 3 s, all after 4 s
	got := ReconfigWindows([]float64{10, 30}, sink, bytes)
	require.Equal(t, []ReconfigWindow{
		{Index: 1, StartSec: 10, EndSec: 30, PreTput: 100, MinTput: 20, Bytes: 9100, MigrateSec: 4, Migrate90Sec: 3},
		{Index: 2, StartSec: 30, EndSec: 40, PreTput: 100, MinTput: 0, Bytes: 6000, MigrateSec: 2, Migrate90Sec: 2},
	}, got)
	// Two operators reconfigured at once, then a third later: the two share
	// the window up to the later start instead of the first getting an
	// empty one.
	together := ReconfigWindows([]float64{10, 10, 30}, sink, bytes)
	require.Equal(t, []ReconfigWindow{
		{Index: 1, StartSec: 10, EndSec: 30, PreTput: 100, MinTput: 20, Bytes: 9100, MigrateSec: 4, Migrate90Sec: 3},
		{Index: 2, StartSec: 10, EndSec: 30, PreTput: 100, MinTput: 20, Bytes: 9100, MigrateSec: 4, Migrate90Sec: 3},
		{Index: 3, StartSec: 30, EndSec: 40, PreTput: 100, MinTput: 0, Bytes: 6000, MigrateSec: 2, Migrate90Sec: 2},
	}, together)
	// A start inside a second: that second's bytes are the migration's
	// first, not lost between the windows.
	mid := ReconfigWindows([]float64{30.4}, sink, bytes)
	require.Equal(t, 6000.0, mid[0].Bytes)
	require.InDelta(t, 1.6, mid[0].MigrateSec, 1e-9)
	// Nothing moved: 0 bytes, 0 s.
	none := ReconfigWindows([]float64{5}, sink, nil)
	require.Equal(t, 0.0, none[0].Bytes)
	require.Equal(t, 0.0, none[0].MigrateSec)
}

func TestCumulativeAndTaskShares(t *testing.T) {
	require.Equal(t, []metrics.Point{{Sec: 0, Value: 1}, {Sec: 1, Value: 3}, {Sec: 2, Value: 6}}, Cumulative([]metrics.Point{{Sec: 2, Value: 3}, {Sec: 0, Value: 1}, {Sec: 1, Value: 2}}))
	byTask := map[string][]metrics.Point{
		"c-0": {{Sec: 0, Value: 90}, {Sec: 1, Value: 90}, {Sec: 5, Value: 40}},
		"c-1": {{Sec: 0, Value: 10}, {Sec: 1, Value: 10}, {Sec: 5, Value: 60}},
	}
	shares, busiest := TaskShares(byTask, 0, 2)
	require.InDelta(t, 0.9, busiest, 1e-9)
	require.InDelta(t, 0.1, shares["c-1"], 1e-9)
	_, after := TaskShares(byTask, 5, 6)
	require.InDelta(t, 0.6, after, 1e-9)
	_, none := TaskShares(byTask, 10, 20)
	require.Equal(t, 0.0, none)
	series := TaskSeries(byTask)
	require.Equal(t, []string{"c-0", "c-1"}, []string{series[0].Label, series[1].Label})
}

// fakeRun is a run whose metric axis starts 2 s before the workflow, so a
// reconfiguration at StartSec s is at metric second s+2.
func fakeRun(exp, kw string, reconfigs ...workflows.ReconfigSpec) RunData {
	start := time.Unix(1000, 0)
	e := workflows.SuiteEntryResult{Experiment: exp, Keyword: kw, StartedAt: start.Add(2 * time.Second), JobID: "j-" + kw}
	for i, rc := range reconfigs {
		e.Reconfigs = append(e.Reconfigs, workflows.ReconfigOutcome{Spec: rc, StartSec: float64(10 + 20*i)})
	}
	sink := secs(slices.Repeat([]float64{100}, 60)...)
	bytes := secs(slices.Repeat([]float64{0}, 60)...)
	for i := range reconfigs {
		bytes[12+20*i].Value, bytes[13+20*i].Value = 5e6, 1e6
	}
	fr := FigureRun{Entry: e, JobStart: start, Sink: sink, Source: sink, Lag: secs(0, 0, 5, 0), Bytes: bytes, BatchAvg: secs(1000, 2000)}
	if len(reconfigs) > 0 {
		fr.Target = reconfigs[0].TargetOperator
	}
	return RunData{FigureRun: fr}
}

var (
	scaleTo = func(p int) workflows.ReconfigSpec {
		return workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: p}
	}
	rebalance = workflows.ReconfigSpec{Type: plan.KindRebalance, TargetOperator: "counter"}
)

func TestFig53_RunSelection(t *testing.T) {
	repeated := fakeRun("repeated", "rep", scaleTo(3), scaleTo(4), scaleTo(5))
	reb := fakeRun("rebalance", "reb", rebalance)
	fod := fakeRun("modes", "fod", scaleTo(4))
	ev := fakeRun("modes", "ev", scaleTo(4))
	two := fakeRun("two", "two", scaleTo(4), workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "window", TargetParallelism: 3})
	none := fakeRun("none", "none")
	all := []RunData{repeated, reb, fod, ev, two, none}

	require.True(t, isFig10Run(repeated, all))
	require.False(t, isFig10Run(fod, all), "variants of one experiment go to Fig 12")
	require.False(t, isFig10Run(none, all))
	require.True(t, isFig11Run(reb))
	require.True(t, isFig13Run(two))
	require.False(t, isFig13Run(repeated))
	groups := fig12Groups(all)
	require.Len(t, groups, 1)
	require.Equal(t, "fod", groups[0][0].Entry.Keyword)
	require.Equal(t, []string{"counter", "window"}, Targets(two.Entry.Reconfigs))
	mig := workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: "tumbling-window-1", TargetWorker: "w1"}
	require.Equal(t, []string{"tumbling-window"}, Targets([]workflows.ReconfigOutcome{{Spec: mig}, {Spec: mig}}), "a task migration's operator comes from its task id")

	// Markers sit on the metric axis: StartSec + (StartedAt - JobStart).
	ms := runMarkers(repeated.FigureRun)
	require.Equal(t, []float64{12, 32, 52}, markerSecs(ms))
	require.Equal(t, "#2 scaleup counter→4", ms[1].Label)

	// Fig 12 aligns each variant on its reconfiguration: bytes at +0 and +1 s.
	tput, migrated := Fig12Lines(groups[0])
	require.Len(t, tput, 2)
	require.Equal(t, -12.0, tput[0].Points[0].Sec, "aligned: the data starts 12 s before the reconfiguration")
	i := slices.IndexFunc(migrated[0].Points, func(p metrics.Point) bool { return p.Sec == 1 })
	require.InDelta(t, 6.0, migrated[0].Points[i].Value, 1e-9, "cumulative MB one second after the start")

	rows := Fig53Rows(all)
	require.Len(t, rows, 5)
	require.Len(t, rows[0].Windows, 3)
	require.Equal(t, 6e6, rows[0].Windows[1].Bytes)
	require.Equal(t, 2.0, rows[0].Windows[1].MigrateSec)
	require.Contains(t, FormatFig53Rows(rows), "| rep | 2 | 32 | 100 | 100 | 6.0 MB | 2, 2 |")
}

func TestWriteSuiteFigures_53Files(t *testing.T) {
	reb := fakeRun("rebalance", "reb", rebalance)
	reb.TaskIn = map[string][]metrics.Point{"counter-0": secs(80, 80, 50), "counter-1": secs(20, 20, 50)}
	two := fakeRun("two", "two", scaleTo(4), workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "window", TargetParallelism: 3})
	two.OperatorIn = []Series{{Label: "counter", Points: secs(1, 2)}, {Label: "window", Points: secs(3, 4)}}
	runs := []RunData{
		fakeRun("repeated", "rep", scaleTo(3), scaleTo(4)), reb,
		fakeRun("modes", "fod", scaleTo(4)), fakeRun("modes", "ev", scaleTo(4)), two,
	}
	dir := t.TempDir()
	paths, cmps, err := WriteSuiteFigures(dir, runs, []string{"10", "11", "12", "13"})
	require.NoError(t, err)
	require.Empty(t, cmps, "no Fig 6/8 comparisons unless asked for")
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	require.ElementsMatch(t, []string{
		"fig10_rep_throughput.png", "fig10_rep_bytes.png",
		"fig11_reb_task_throughput.png", "fig11_reb_lag.png",
		"fig12_modes_throughput.png", "fig12_modes_migrated.png",
		"fig13_two_operators.png", "fig13_two_lag.png",
	}, names)
	for _, p := range paths {
		require.FileExists(t, p)
	}
}
