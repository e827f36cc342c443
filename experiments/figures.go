package experiments

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"koala/dataplane/metrics"
	"koala/workflows"
)

// MetricsReader is the part of *metrics.ClickHouse that `koala figures`
// reads.
type MetricsReader interface {
	JobStart(ctx context.Context, job string) (time.Time, error)
	Throughput(ctx context.Context, job, operator string) ([]metrics.Point, error)
	Lag(ctx context.Context, job string) ([]metrics.Point, error)
	ColumnSeries(ctx context.Context, job, operator, column, agg string) ([]metrics.Point, error)
	ColumnByTask(ctx context.Context, job, operator, column, agg string) (map[string][]metrics.Point, error)
	BatchHists(ctx context.Context, job, operator string) ([]metrics.BatchHistSample, error)
}

// FigureRun is one suite entry's series, on its job's metric axis (seconds
// since the job's first metric row).
type FigureRun struct {
	Entry    workflows.SuiteEntryResult
	JobStart time.Time
	Target   string          // the reconfigured operator
	Source   []metrics.Point // source records_in per second
	Sink     []metrics.Point // sink records_in per second
	Lag      []metrics.Point // source kafka_lag per second
	// Per-batch latency of the target operator: the mean over its tasks of
	// batch_time_avg_us, and the max over its tasks of batch_time_max_us;
	// seconds in which no task ran a batch are left out of both.
	BatchAvg       []metrics.Point
	BatchMax       []metrics.Point
	BatchMaxByTask map[string][]metrics.Point
	// BatchHists are the target operator's per-task per-second HDR
	// histograms of individual batch times (none for runs older than the
	// batch_time_hdr column); BatchP50 and BatchP99 are, per second, the
	// percentiles of those merged across tasks (see
	// BatchPercentilesPerSecond; empty when there are none or one does not
	// decode, and Fig 8 falls back to BatchAvg and BatchMax).
	BatchHists         []metrics.BatchHistSample
	BatchP50, BatchP99 []metrics.Point
	Bytes              []metrics.Point
	Errors             []string // failed reads (the run is still plotted with what was read)
}

// Operators of the queries: the source is always "source"; the sink is the
// last operator (named "sink" in every query so far).
const (
	figSourceOp = "source"
	figSinkOp   = "sink"
)

// ReadFigureRun reads what the figures need of one finished suite entry.
func ReadFigureRun(ctx context.Context, r MetricsReader, e workflows.SuiteEntryResult) FigureRun {
	fr := FigureRun{Entry: e}
	note := func(what string, err error) {
		if err != nil {
			fr.Errors = append(fr.Errors, what+": "+err.Error())
		}
	}
	job := e.JobID
	if job == "" {
		job = workflows.JobIDFor(e.WorkflowID)
	}
	var err error
	fr.JobStart, err = r.JobStart(ctx, job)
	if err != nil {
		note("job start", err)
		return fr
	}
	fr.Source, err = r.Throughput(ctx, job, figSourceOp)
	note("source throughput", err)
	fr.Sink, err = r.Throughput(ctx, job, figSinkOp)
	note("sink throughput", err)
	fr.Lag, err = r.Lag(ctx, job)
	note("kafka lag", err)
	for _, rc := range e.Reconfigs {
		if op := rc.Spec.TargetOperator; op != "" {
			fr.Target = op
			break
		}
	}
	if fr.Target == "" {
		return fr
	}
	byTask, err := r.ColumnByTask(ctx, job, fr.Target, "batch_time_avg_us", metrics.AggMax)
	note("batch_time_avg_us", err)
	fr.BatchAvg = MeanOverTasks(byTask)
	fr.BatchMax, err = r.ColumnSeries(ctx, job, fr.Target, "batch_time_max_us", metrics.AggMax)
	note("batch_time_max_us", err)
	// 0 is "no batch ran in that second" (e.g. paused), not a latency.
	fr.BatchMax = slices.DeleteFunc(fr.BatchMax, func(p metrics.Point) bool { return p.Value <= 0 })
	fr.BatchMaxByTask, err = r.ColumnByTask(ctx, job, fr.Target, "batch_time_max_us", metrics.AggMax)
	note("batch_time_max_us by task", err)
	fr.readBatchHists(ctx, r, job, note)
	fr.Bytes, err = r.ColumnSeries(ctx, job, fr.Target, "bytes_transferred", metrics.AggSum)
	note("bytes_transferred", err)
	return fr
}

// readBatchHists reads the target's batch-time histograms and their
// per-second percentiles; a failure is noted and leaves the percentiles
// empty (the aggregates are drawn instead).
func (fr *FigureRun) readBatchHists(ctx context.Context, r MetricsReader, job string, note func(string, error)) {
	var err error
	fr.BatchHists, err = r.BatchHists(ctx, job, fr.Target)
	note("batch_time_hdr", err)
	fr.BatchP50, fr.BatchP99, err = BatchPercentilesPerSecond(fr.BatchHists)
	if err != nil {
		note("batch_time_hdr (Fig 8 drawn from the per-second aggregates)", err)
	}
}

// MeanOverTasks is, per second, the mean of the tasks' values that are > 0
// (a task that ran no batch in a second reports 0 and is left out); seconds
// where no task ran a batch are absent. Tasks are visited in sorted order.
func MeanOverTasks(byTask map[string][]metrics.Point) []metrics.Point {
	sum := map[float64]float64{}
	n := map[float64]int{}
	tasks := make([]string, 0, len(byTask))
	for t := range byTask {
		tasks = append(tasks, t)
	}
	slices.Sort(tasks)
	for _, t := range tasks {
		for _, p := range byTask[t] {
			if isFinite(p.Value) && p.Value > 0 {
				sum[p.Sec] += p.Value
				n[p.Sec]++
			}
		}
	}
	out := make([]metrics.Point, 0, len(sum))
	for s, v := range sum {
		out = append(out, metrics.Point{Sec: s, Value: v / float64(n[s])})
	}
	return CleanPoints(out)
}

// ReconfigZero is the first reconfiguration's start on the run's metric
// axis (0 when it has none or the job start is unknown).
func (fr FigureRun) ReconfigZero() float64 {
	if len(fr.Entry.Reconfigs) == 0 || fr.JobStart.IsZero() || fr.Entry.StartedAt.IsZero() {
		return 0
	}
	return fr.Entry.Reconfigs[0].StartSec + fr.Entry.StartedAt.Sub(fr.JobStart).Seconds()
}

// Row is the run as a comparison row (experiments/compare.go's metrics:
// pre/min throughput, lag recovery, HDR batch p50/p99 and peak per-second
// batch max, bytes migrated).
func (fr FigureRun) Row() CompareRow {
	e := fr.Entry
	row := CompareRow{Protocol: e.Keyword, ReconfigProtocol: e.Protocol, StateBackend: e.StateBackend, WorkflowID: e.WorkflowID}
	res := workflows.ExperimentResult{
		JobID: e.JobID, StartedAt: e.StartedAt, Produced: e.Produced, Lost: e.Lost, Duplicated: e.Duplicated, Reconfigs: e.Reconfigs,
	}
	start := fr.JobStart
	if start.IsZero() {
		start = e.StartedAt
	}
	row = BuildRow(row, res, e.TotalRuntime, start, RunSeries{Sink: fr.Sink, Lag: fr.Lag, BatchMaxByTask: fr.BatchMaxByTask, BatchHists: fr.BatchHists, Bytes: fr.Bytes})
	if len(fr.Errors) > 0 {
		row.MetricsError = strings.Join(fr.Errors, "; ")
	}
	return row
}

// FigureGroup is the runs of one experiment (one panel of the paper's
// figures), one line per suite keyword, in suite order.
type FigureGroup struct {
	Experiment string
	Runs       []FigureRun
}

// GroupRuns groups runs by experiment name, keeping the suite order of the
// first appearance of each experiment and of the runs within it.
func GroupRuns(runs []FigureRun) []FigureGroup {
	var out []FigureGroup
	for _, r := range runs {
		i := slices.IndexFunc(out, func(g FigureGroup) bool { return g.Experiment == r.Entry.Experiment })
		if i < 0 {
			out = append(out, FigureGroup{Experiment: r.Entry.Experiment})
			i = len(out) - 1
		}
		out[i].Runs = append(out[i].Runs, r)
	}
	return out
}

// Figure files written per experiment by WriteFigures.
const (
	Fig6ThroughputFile = "fig6_%s_throughput.png"
	Fig6LagFile        = "fig6_%s_lag.png"
	Fig8LatencyFile    = "fig8_%s_latency.png"
)

// The figures show the seconds [-FigSecondsBefore, FigSecondsAfter] around
// the reconfiguration start (the job's warm-up and the drain after the input
// ends are left out; the comparison tables use the whole run).
const (
	FigSecondsBefore = 30
	FigSecondsAfter  = 30
)

// Window returns the points with from ≤ Sec ≤ to.
func Window(pts []metrics.Point, from, to float64) []metrics.Point {
	var out []metrics.Point
	for _, p := range pts {
		if p.Sec >= from && p.Sec <= to {
			out = append(out, p)
		}
	}
	return out
}

// WriteFigures writes, per experiment of the suite, Fig 6 (source
// throughput and Kafka lag over time, one line per keyword, aligned on the
// reconfiguration start = 0 s, dashed line; see Window) and Fig 8 (per-batch
// latency of the reconfigured operator in ms, p99 panel over p50 panel; see
// Fig8Panels), plus the comparison of compare.go (compare.md and
// compare.json under compare_<experiment>/). It returns the paths written.
func WriteFigures(dir string, runs []FigureRun) ([]string, []Comparison, error) {
	var paths []string
	var cmps []Comparison
	for _, g := range GroupRuns(runs) {
		name := safeName(g.Experiment)
		src, lag := fig6Series(g.Runs)
		markers := []Marker{{Sec: 0, Label: "reconfiguration start"}}
		cmp := Comparison{Experiment: g.Experiment, Config: "suite"}
		for _, r := range g.Runs {
			cmp.Rows = append(cmp.Rows, r.Row())
		}
		cmps = append(cmps, cmp)
		figs := []struct {
			file, title, y string
			series         []Series
		}{
			{Fig6ThroughputFile, "Fig 6 " + g.Experiment + ": source throughput", "events/s", src},
			{Fig6LagFile, "Fig 6 " + g.Experiment + ": Kafka lag", "records", lag},
		}
		for _, f := range figs {
			if !anyPoints(f.series) {
				continue
			}
			title := f.title
			if allZero(f.series) {
				title += " (all zero)"
			}
			p := filepath.Join(dir, fmt.Sprintf(f.file, name))
			if err := WriteTimeSeriesPNG(p, title, f.y, f.series, markers); err != nil {
				return paths, cmps, err
			}
			paths = append(paths, p)
		}
		if p99, p50 := Fig8Panels(g.Runs); anyPoints(p99.Series) {
			p := filepath.Join(dir, fmt.Sprintf(Fig8LatencyFile, name))
			if err := WriteStackedTimeSeriesPNG(p, fig8Title(g.Experiment, g.Runs), []Panel{p99, p50}, markers); err != nil {
				return paths, cmps, err
			}
			paths = append(paths, p)
		}
		cp, err := cmp.WriteFiles(filepath.Join(dir, "compare_"+name))
		paths = append(paths, cp...)
		if err != nil {
			return paths, cmps, err
		}
	}
	return paths, cmps, nil
}

// fig6Series are Fig 6's lines, one per run: source throughput and Kafka
// lag aligned on the reconfiguration start and cropped to the figure
// window.
func fig6Series(runs []FigureRun) (src, lag []Series) {
	crop := func(pts []metrics.Point) []metrics.Point { return Window(pts, -FigSecondsBefore, FigSecondsAfter) }
	for _, r := range runs {
		zero := r.ReconfigZero()
		src = append(src, Series{Label: r.Entry.Keyword, Points: crop(Shift(r.Source, zero))})
		lag = append(lag, Series{Label: r.Entry.Keyword, Points: crop(Shift(r.Lag, zero))})
	}
	return src, lag
}

// WriteFigureTables prints each experiment's comparison table.
func WriteFigureTables(w io.Writer, cmps []Comparison) error {
	for _, c := range cmps {
		if _, err := fmt.Fprintf(w, "\n%s\n", c.Experiment); err != nil {
			return err
		}
		if err := c.WriteTable(w); err != nil {
			return err
		}
	}
	return nil
}

func scale(pts []metrics.Point, f float64) []metrics.Point {
	out := slices.Clone(pts)
	for i := range out {
		out[i].Value *= f
	}
	return out
}

func anyPoints(series []Series) bool {
	for _, s := range series {
		if len(s.Points) > 0 {
			return true
		}
	}
	return false
}

// safeName keeps letters, digits, '-', '_' and '.' of s for a file name.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "experiment"
	}
	return b.String()
}
