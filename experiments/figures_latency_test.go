package experiments

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/stretchr/testify/require"

	"koala/dataplane/metrics"
	"koala/workflows"
	"koala/workflows/plan"
)

// batchTimes are one task's batch times in µs per metric second.
type batchTimes map[float64][]int64

// encodeHists turns per-task batch times into the rows a worker writes: one
// histogram per task and second, recorded and encoded as the worker does.
func encodeHists(t *testing.T, byTask map[string]batchTimes) []metrics.BatchHistSample {
	t.Helper()
	var out []metrics.BatchHistSample
	for task, secs := range byTask {
		for sec, vals := range secs {
			var h metrics.BatchHist
			for _, v := range vals {
				h.Observe(time.Duration(v) * time.Microsecond)
			}
			enc, err := h.Take()
			require.NoError(t, err)
			out = append(out, metrics.BatchHistSample{Task: task, Sec: sec, Hist: enc})
		}
	}
	return out
}

// expectedPercentiles records, per second, every task's values of that
// second into one fresh histogram and reads its p50 and p99 (shifted by
// zero and in ms, as Fig 8 plots them).
func expectedPercentiles(t *testing.T, byTask map[string]batchTimes, zero float64) (p50, p99 []metrics.Point) {
	all := map[float64][]int64{}
	for _, secs := range byTask {
		for sec, vals := range secs {
			all[sec] = append(all[sec], vals...)
		}
	}
	var keys []float64
	for s := range all {
		keys = append(keys, s)
	}
	slices.Sort(keys)
	for _, s := range keys {
		h := hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
		for _, v := range all[s] {
			require.NoError(t, h.RecordValue(v))
		}
		p50 = append(p50, metrics.Point{Sec: s - zero, Value: float64(h.ValueAtQuantile(50)) / 1000})
		p99 = append(p99, metrics.Point{Sec: s - zero, Value: float64(h.ValueAtQuantile(99)) / 1000})
	}
	return p50, p99
}

// requireSeries checks the seconds exactly and the values to 1e-9 ms.
func requireSeries(t *testing.T, want, got []metrics.Point, msg string) {
	t.Helper()
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.Equal(t, want[i].Sec, got[i].Sec, msg)
		require.InDelta(t, want[i].Value, got[i].Value, 1e-9, "%s: second %.0f", msg, want[i].Sec)
	}
}

func fig8Entry(kw, job string, jobStart time.Time) workflows.SuiteEntryResult {
	return workflows.SuiteEntryResult{
		Keyword: kw, Experiment: "counter x", Status: workflows.SuiteSucceeded, JobID: job, TotalRuntime: 20,
		StartedAt: jobStart.Add(2 * time.Second), // reconfiguration at metric second 10
		Reconfigs: []workflows.ReconfigOutcome{{StartSec: 8, EndSec: 9, Spec: workflows.ReconfigSpec{TargetOperator: "counter"}}},
	}
}

func TestFig8_HDRPercentilesPerSecondAndFallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	draw := func(n int, lo, hi int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = lo + rng.Int64N(hi-lo)
		}
		return out
	}
	// Two tasks over seconds 6..13; the reconfiguration (second 10) gives
	// task 1 a tail of slow batches, and task 0 runs no batch in second 12.
	// Per-task values differ, so a per-task percentile (or a mean of them)
	// would not equal the merged one.
	byTask := map[string]batchTimes{"counter-0": {}, "counter-1": {}}
	for s := 6.0; s <= 13; s++ {
		if s != 12 {
			byTask["counter-0"][s] = draw(300, 500, 1500)
		}
		byTask["counter-1"][s] = draw(150, 2000, 4000)
		if s == 10 {
			byTask["counter-1"][s] = append(byTask["counter-1"][s], draw(20, 80_000, 120_000)...)
		}
	}
	jobStart := time.Unix(1000, 0)
	fm := &fakeMetrics{start: jobStart,
		source: map[string][]metrics.Point{"j-lazy": secs(100, 100), "j-old": secs(100, 100), "j-bad": secs(100, 100)},
		hists:  map[string][]metrics.BatchHistSample{"j-lazy": encodeHists(t, byTask)},
	}
	lazy := ReadFigureRun(context.Background(), fm, fig8Entry("lazy", "j-lazy", jobStart))
	require.Empty(t, lazy.Errors)
	require.Contains(t, fm.calls, "batch_time_hdr counter")
	old := ReadFigureRun(context.Background(), fm, fig8Entry("old", "j-old", jobStart))
	require.Empty(t, old.Errors)
	require.True(t, lazy.Latency().HDR)
	require.False(t, old.Latency().HDR, "no histogram rows: per-second aggregates")

	wantP50, wantP99 := expectedPercentiles(t, byTask, lazy.ReconfigZero())
	p99, p50 := Fig8Panels([]FigureRun{lazy, old})
	require.Len(t, p99.Series, 2)
	require.Equal(t, "lazy", p99.Series[0].Label)
	require.Len(t, p99.Series[0].Points, 8)
	requireSeries(t, wantP99, p99.Series[0].Points, "p99 of the tasks' histograms merged per second")
	requireSeries(t, wantP50, p50.Series[0].Points, "p50 of the tasks' histograms merged per second")
	spike := slices.IndexFunc(p99.Series[0].Points, func(p metrics.Point) bool { return p.Sec == 0 })
	require.Greater(t, p99.Series[0].Points[spike].Value, 50.0, "the slow batches at the reconfiguration are in its p99 (ms)")

	// The old run is drawn from batch_time_max_us / batch_time_avg_us and
	// says so in its legend and in the mixed axis labels.
	require.Equal(t, "old (per-s max, no HDR)", p99.Series[1].Label)
	require.Equal(t, "old (per-s mean, no HDR)", p50.Series[1].Label)
	require.Equal(t, []metrics.Point{{Sec: 0, Value: 2}, {Sec: 1, Value: 9}}, p99.Series[1].Points)
	require.Equal(t, []metrics.Point{{Sec: 0, Value: 2}, {Sec: 1, Value: 4}}, p50.Series[1].Points)
	require.Equal(t, "p99 or per-s max (ms)", p99.YLabel)
	require.Equal(t, "p50 or per-s mean (ms)", p50.YLabel)
	onlyHDR, _ := Fig8Panels([]FigureRun{lazy})
	require.Equal(t, "p99 batch time (ms)", onlyHDR.YLabel)
	onlyOld, _ := Fig8Panels([]FigureRun{old})
	require.Equal(t, "per-s max batch time (ms)", onlyOld.YLabel)
	require.Contains(t, fig8Title("x", []FigureRun{lazy}), "HDR histograms of all tasks merged per second")
	require.Contains(t, fig8Title("x", []FigureRun{old}), "per-second aggregates")

	// The comparison row of the figures gets the HDR windows too.
	row := lazy.Row()
	require.NotNil(t, row.ReconfigBatch)
	require.NotNil(t, row.PreBatch)
	require.Nil(t, old.Row().ReconfigBatch)

	// A histogram that does not decode is reported and the run falls back.
	fm.hists["j-bad"] = []metrics.BatchHistSample{{Task: "counter-0", Sec: 9, Hist: "not a histogram"}}
	bad := ReadFigureRun(context.Background(), fm, fig8Entry("bad", "j-bad", jobStart))
	require.False(t, bad.Latency().HDR)
	require.True(t, slices.ContainsFunc(bad.Errors, func(e string) bool { return strings.Contains(e, "batch_time_hdr") }), "%v", bad.Errors)

	dir := t.TempDir()
	paths, _, err := WriteFigures(dir, []FigureRun{lazy, old})
	require.NoError(t, err)
	p := filepath.Join(dir, fmt.Sprintf(Fig8LatencyFile, "counter_x"))
	require.Contains(t, paths, p)
	st, err := os.Stat(p)
	require.NoError(t, err)
	require.Positive(t, st.Size())
}

func TestBatchPercentilesPerSecond_Empty(t *testing.T) {
	p50, p99, err := BatchPercentilesPerSecond(nil)
	require.NoError(t, err)
	require.Empty(t, p50)
	require.Empty(t, p99)
}

// A task migration names its operator only through its task id:
// ReadRunData reads the latency series (histograms included) that
// ReadFigureRun could not.
func TestFig8_TaskMigrationReadsHistograms(t *testing.T) {
	jobStart := time.Unix(1000, 0)
	byTask := map[string]batchTimes{"counter-1": {9: {1000, 2000, 3000}, 10: {50_000}}}
	fm := &fakeMetrics{start: jobStart,
		source: map[string][]metrics.Point{"j-mig": secs(100, 100)},
		hists:  map[string][]metrics.BatchHistSample{"j-mig": encodeHists(t, byTask)},
	}
	e := fig8Entry("mig", "j-mig", jobStart)
	e.Reconfigs[0].Spec = workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: "counter-1", TargetWorker: "w2"}
	fr := ReadFigureRun(context.Background(), fm, e)
	require.Empty(t, fr.Target)
	d := ReadRunData(context.Background(), fm, fr, nil, DefaultFigures)
	require.Empty(t, d.Errors)
	require.Equal(t, "counter", d.Target)
	require.True(t, d.Latency().HDR)
	_, wantP99 := expectedPercentiles(t, byTask, d.ReconfigZero())
	p99, _ := Fig8Panels([]FigureRun{d.FigureRun})
	requireSeries(t, wantP99, p99.Series[0].Points, "p99 per second")
	require.NotEmpty(t, d.BatchMax, "the per-second max is read too (compare row, fallback)")
}
