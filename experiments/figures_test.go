package experiments

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"koala/dataplane/metrics"
	"koala/workflows"
)

// fakeMetrics serves canned series per job.
type fakeMetrics struct {
	start  time.Time
	source map[string][]metrics.Point
	hists  map[string][]metrics.BatchHistSample
	calls  []string
}

func (f *fakeMetrics) JobStart(_ context.Context, job string) (time.Time, error) {
	if _, ok := f.source[job]; !ok {
		return time.Time{}, metrics.ErrNoData
	}
	return f.start, nil
}
func (f *fakeMetrics) Throughput(_ context.Context, job, op string) ([]metrics.Point, error) {
	f.calls = append(f.calls, "throughput "+op)
	return f.source[job], nil
}
func (f *fakeMetrics) Lag(_ context.Context, job string) ([]metrics.Point, error) {
	return []metrics.Point{{Sec: 10, Value: 0}, {Sec: 11, Value: 500}, {Sec: 12, Value: 0}}, nil
}
func (f *fakeMetrics) ColumnSeries(_ context.Context, job, op, col, agg string) ([]metrics.Point, error) {
	f.calls = append(f.calls, col+" "+op+" "+agg)
	return []metrics.Point{{Sec: 10, Value: 2000}, {Sec: 11, Value: 9000}}, nil
}
func (f *fakeMetrics) ColumnByTask(_ context.Context, job, op, col, agg string) (map[string][]metrics.Point, error) {
	return map[string][]metrics.Point{
		"counter-0": {{Sec: 10, Value: 1000}, {Sec: 11, Value: 0}},
		"counter-1": {{Sec: 10, Value: 3000}, {Sec: 11, Value: 4000}},
	}, nil
}

func (f *fakeMetrics) BatchHists(_ context.Context, job, op string) ([]metrics.BatchHistSample, error) {
	f.calls = append(f.calls, "batch_time_hdr "+op)
	return f.hists[job], nil
}

func TestMeanOverTasks_SkipsIdleTasks(t *testing.T) {
	got := MeanOverTasks(map[string][]metrics.Point{
		"b": {{Sec: 1, Value: 3}, {Sec: 2, Value: 0}},
		"a": {{Sec: 1, Value: 1}, {Sec: 2, Value: 4}, {Sec: 3, Value: 0}},
	})
	require.Equal(t, []metrics.Point{{Sec: 1, Value: 2}, {Sec: 2, Value: 4}}, got)
}

func TestFigures_ReadAlignAndWrite(t *testing.T) {
	jobStart := time.Unix(1000, 0)
	fm := &fakeMetrics{start: jobStart, source: map[string][]metrics.Point{
		"j-lazy": {{Sec: 8, Value: 100}, {Sec: 9, Value: 100}, {Sec: 10, Value: 90}, {Sec: 11, Value: 100}},
		"j-sr":   {{Sec: 8, Value: 100}, {Sec: 9, Value: 100}, {Sec: 12, Value: 300}},
	}}
	entry := func(kw, job string) workflows.SuiteEntryResult {
		return workflows.SuiteEntryResult{
			Keyword: kw, Experiment: "counter x", Status: workflows.SuiteSucceeded, JobID: job, TotalRuntime: 20,
			StartedAt: jobStart.Add(2 * time.Second), // reconfig at 8 s after StartedAt = 10 s on the metric axis
			Reconfigs: []workflows.ReconfigOutcome{{StartSec: 8, EndSec: 9, Spec: workflows.ReconfigSpec{TargetOperator: "counter"}}},
		}
	}
	var runs []FigureRun
	for _, e := range []workflows.SuiteEntryResult{entry("lazy", "j-lazy"), entry("sr", "j-sr")} {
		r := ReadFigureRun(context.Background(), fm, e)
		require.Empty(t, r.Errors)
		require.Equal(t, "counter", r.Target)
		require.InDelta(t, 10, r.ReconfigZero(), 1e-9)
		runs = append(runs, r)
	}
	require.Equal(t, []metrics.Point{{Sec: 10, Value: 2000}, {Sec: 11, Value: 4000}}, runs[0].BatchAvg)
	require.Contains(t, fm.calls, "throughput source")
	require.Contains(t, fm.calls, "batch_time_max_us counter max")

	// A run without metrics keeps its error and is still drawable.
	missing := ReadFigureRun(context.Background(), fm, entry("gone", "j-gone"))
	require.NotEmpty(t, missing.Errors)

	dir := t.TempDir()
	paths, cmps, err := WriteFigures(dir, runs)
	require.NoError(t, err)
	for _, f := range []string{Fig6ThroughputFile, Fig6LagFile, Fig8LatencyFile} {
		p := filepath.Join(dir, fmt.Sprintf(f, "counter_x"))
		require.Contains(t, paths, p)
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	require.FileExists(t, filepath.Join(dir, "compare_counter_x", CompareMarkdownFile))
	require.Len(t, cmps, 1)
	require.Len(t, cmps[0].Rows, 2)
	// The stop-and-restart run's missing seconds 10–11 count as a stall.
	require.NotNil(t, cmps[0].Rows[1].MinThroughput)
	require.Zero(t, *cmps[0].Rows[1].MinThroughput)
}
