package experiments

import (
	"fmt"
	"path/filepath"
	"slices"

	"koala/dataplane/metrics"
	"koala/workflows"
	"koala/workflows/plan"
)

// Section 5.3's figures (reconfiguration scenarios). Which runs a figure
// draws follows from the runs themselves, so one suite can hold every
// scenario:
//
//   - Fig 11 (rebalance): runs with a rebalance.
//   - Fig 13 (two operators at once): runs reconfiguring ≥ 2 operators.
//   - Fig 12 (fetch-on-demand vs progressive, chunk sizes): experiments
//     with several runs (one line per keyword).
//   - Fig 10 (repeated reconfigurations, task migration): every other run
//     with a reconfiguration.
//
// Runs are on their own metric axis (seconds since the job's first metric
// row) with a dashed marker per reconfiguration, except Fig 12 whose
// variants are aligned on the reconfiguration start = 0 s.

// Files written by the section 5.3 figures (%s: keyword or experiment).
const (
	Fig10ThroughputFile = "fig10_%s_throughput.png"
	Fig10BytesFile      = "fig10_%s_bytes.png"
	Fig11TasksFile      = "fig11_%s_task_throughput.png"
	Fig11LagFile        = "fig11_%s_lag.png"
	Fig12ThroughputFile = "fig12_%s_throughput.png"
	Fig12MigratedFile   = "fig12_%s_migrated.png"
	Fig13OperatorsFile  = "fig13_%s_operators.png"
	Fig13LagFile        = "fig13_%s_lag.png"
)

// Fig12SecondsAfter is how much of each variant Fig 12 shows after the
// reconfiguration start (migration can take longer than Fig 6's window).
const Fig12SecondsAfter = 90

const mb = 1e6 // MB as BytesText writes it

// ReconfigWindow summarises one reconfiguration of a run: from its start to
// the next one's (or the end of the data).
type ReconfigWindow struct {
	Index      int     `json:"index"` // 1-based
	StartSec   float64 `json:"start_sec"`
	EndSec     float64 `json:"end_sec"`
	PreTput    float64 `json:"pre_tput"` // mean sink records/s over the 10 s before
	MinTput    float64 `json:"min_tput"` // lowest sink records/s in the 10 s after the start
	Bytes      float64 `json:"bytes"`    // bytes_transferred in the window
	MigrateSec float64 `json:"migrate_sec"`
	// Migrate90Sec is from the start to the end of the second in which 90 %
	// of the window's bytes had moved (the tail of rarely touched keys left
	// out; 0: nothing moved).
	Migrate90Sec float64 `json:"migrate90_sec"`
}

// ReconfigWindows splits a run at its reconfiguration starts (markers on
// the metric axis) and summarises each window. MigrateSec is from the start
// to the end of the last second with bytes transferred (0: nothing moved);
// a second's bytes count in the window its end falls in.
// Reconfigurations that start in the same second (different operators
// reconfigured concurrently) share one window, which ends at the next later
// start: the metrics do not tell their bytes apart, so each of them reports
// the window's total.
func ReconfigWindows(starts []float64, sink, bytes []metrics.Point) []ReconfigWindow {
	sink, bytes = CleanPoints(sink), CleanPoints(bytes)
	end := 0.0
	for _, pts := range [][]metrics.Point{sink, bytes} {
		if n := len(pts); n > 0 {
			end = max(end, pts[n-1].Sec+1)
		}
	}
	var out []ReconfigWindow
	for i, s := range starts {
		w := ReconfigWindow{Index: i + 1, StartSec: s, EndSec: max(end, s)}
		for _, next := range starts[i+1:] {
			if next > s {
				w.EndSec = next
				break
			}
		}
		w.PreTput, _, _ = WindowMean(sink, s-10, s)
		if lo, ok := WindowMin(sink, s, min(s+10, w.EndSec)); ok {
			w.MinTput = lo
		}
		// A second's bytes belong to the window its end falls in, so the
		// second the reconfiguration starts in counts: a start at 30.4 s
		// moves its first bytes in the point of second 30, often the
		// busiest one.
		in := func(p metrics.Point) bool { return p.Value > 0 && p.Sec+1 > s && p.Sec+1 <= w.EndSec }
		for _, p := range bytes {
			if in(p) {
				w.Bytes += p.Value
				w.MigrateSec = p.Sec + 1 - s
			}
		}
		sum := 0.0
		for _, p := range bytes {
			if in(p) {
				if sum += p.Value; sum >= 0.9*w.Bytes {
					w.Migrate90Sec = p.Sec + 1 - s
					break
				}
			}
		}
		out = append(out, w)
	}
	return out
}

// markerSecs are the seconds of markers.
func markerSecs(ms []Marker) []float64 {
	out := make([]float64, len(ms))
	for i, m := range ms {
		out[i] = m.Sec
	}
	return out
}

// Cumulative is the running sum of the points (sorted by second).
func Cumulative(pts []metrics.Point) []metrics.Point {
	out := CleanPoints(pts)
	sum := 0.0
	for i := range out {
		sum += out[i].Value
		out[i].Value = sum
	}
	return out
}

// TaskShares is, over [from, to), each task's share of the records the
// tasks took in, and the busiest task's share (0 when none came in).
func TaskShares(byTask map[string][]metrics.Point, from, to float64) (shares map[string]float64, busiest float64) {
	shares = map[string]float64{}
	total := 0.0
	for task, pts := range byTask {
		for _, p := range pts {
			if p.Sec >= from && p.Sec < to && isFinite(p.Value) {
				shares[task] += p.Value
				total += p.Value
			}
		}
	}
	if total == 0 {
		return map[string]float64{}, 0
	}
	for task := range shares {
		shares[task] /= total
		busiest = max(busiest, shares[task])
	}
	return shares, busiest
}

// TaskSeries turns per-task points into one series per task, sorted by
// task id.
func TaskSeries(byTask map[string][]metrics.Point) []Series {
	tasks := make([]string, 0, len(byTask))
	for t := range byTask {
		tasks = append(tasks, t)
	}
	slices.Sort(tasks)
	out := make([]Series, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, Series{Label: t, Points: CleanPoints(byTask[t])})
	}
	return out
}

// hasKind reports whether the run has a reconfiguration of kind.
func hasKind(r RunData, kind string) bool {
	return slices.ContainsFunc(r.Entry.Reconfigs, func(rc workflows.ReconfigOutcome) bool { return rc.Spec.Type == kind })
}

func (r RunData) name() string { return safeName(r.Entry.Keyword) }

// Fig 11 and 13 claim their runs; Fig 12 claims experiments with several
// runs; Fig 10 draws the rest.
func isFig11Run(r RunData) bool { return hasKind(r, plan.KindRebalance) }
func isFig13Run(r RunData) bool { return len(Targets(r.Entry.Reconfigs)) >= 2 }

func fig12Groups(runs []RunData) [][]RunData {
	var out [][]RunData
	var order []string
	by := map[string][]RunData{}
	for _, r := range runs {
		if len(r.Entry.Reconfigs) == 0 || isFig11Run(r) || isFig13Run(r) {
			continue
		}
		e := r.Entry.Experiment
		if _, ok := by[e]; !ok {
			order = append(order, e)
		}
		by[e] = append(by[e], r)
	}
	for _, e := range order {
		if len(by[e]) >= 2 {
			out = append(out, by[e])
		}
	}
	return out
}

func isFig10Run(r RunData, all []RunData) bool {
	if len(r.Entry.Reconfigs) == 0 || isFig11Run(r) || isFig13Run(r) {
		return false
	}
	for _, g := range fig12Groups(all) {
		if slices.ContainsFunc(g, func(x RunData) bool { return x.Entry.Keyword == r.Entry.Keyword }) {
			return false
		}
	}
	return true
}

// WriteFig10 draws, per run with repeated reconfigurations (or a task
// migration), the sink throughput and the bytes transferred per second to
// the reconfigured operator over the whole run, a marker per
// reconfiguration.
func WriteFig10(dir string, runs []RunData) ([]string, error) {
	var paths []string
	var err error
	for _, r := range runs {
		if !isFig10Run(r, runs) {
			continue
		}
		ms := runMarkers(r.FigureRun)
		tput, bytes := fig10Series(r)
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig10ThroughputFile, r.name())),
			"Fig 10 "+r.Entry.Keyword+": sink throughput", "records/s", []Series{tput}, ms)
		if err != nil {
			return paths, err
		}
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig10BytesFile, r.name())),
			"Fig 10 "+r.Entry.Keyword+": state transferred to "+r.Target, "MB/s", []Series{bytes}, ms)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// fig10Series are Fig 10's lines of run r over the whole run: sink
// records/s and MB/s transferred to the reconfigured operator.
func fig10Series(r RunData) (tput, bytes Series) {
	return Series{Label: r.Entry.Keyword, Points: CleanPoints(r.Sink)}, Series{Label: r.Entry.Keyword, Points: scale(CleanPoints(r.Bytes), 1.0/mb)}
}

// lagSeries is run r's source Kafka lag over the whole run.
func lagSeries(r RunData) Series { return Series{Label: r.Entry.Keyword, Points: CleanPoints(r.Lag)} }

// operatorSeries are Fig 13's lines: each reconfigured operator's
// records/s in.
func operatorSeries(r RunData) []Series {
	out := make([]Series, 0, len(r.OperatorIn))
	for _, s := range r.OperatorIn {
		out = append(out, Series{Label: s.Label, Points: CleanPoints(s.Points)})
	}
	return out
}

// WriteFig11 draws, per rebalanced run, the records/s of each task of the
// rebalanced operator and the source's Kafka lag.
func WriteFig11(dir string, runs []RunData) ([]string, error) {
	var paths []string
	var err error
	for _, r := range runs {
		if !isFig11Run(r) {
			continue
		}
		ms := runMarkers(r.FigureRun)
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig11TasksFile, r.name())),
			"Fig 11 "+r.Entry.Keyword+": per-task throughput of "+r.Target, "records/s", TaskSeries(r.TaskIn), ms)
		if err != nil {
			return paths, err
		}
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig11LagFile, r.name())),
			"Fig 11 "+r.Entry.Keyword+": Kafka lag", "records", []Series{lagSeries(r)}, ms)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// Fig12Lines aligns each variant on its reconfiguration start and returns
// its sink throughput and cumulative migrated MB over
// [-FigSecondsBefore, Fig12SecondsAfter].
func Fig12Lines(runs []RunData) (tput, migrated []Series) {
	for _, r := range runs {
		zero := r.ReconfigZero()
		crop := func(pts []metrics.Point) []metrics.Point {
			return Window(Shift(pts, zero), -FigSecondsBefore, Fig12SecondsAfter)
		}
		tput = append(tput, Series{Label: r.Entry.Keyword, Points: crop(r.Sink)})
		migrated = append(migrated, Series{Label: r.Entry.Keyword, Points: scale(crop(Cumulative(r.Bytes)), 1.0/mb)})
	}
	return tput, migrated
}

// WriteFig12 draws, per experiment with several variants, their sink
// throughput and cumulative migrated state, aligned on the
// reconfiguration start.
func WriteFig12(dir string, runs []RunData) ([]string, error) {
	var paths []string
	var err error
	for _, g := range fig12Groups(runs) {
		name := safeName(g[0].Entry.Experiment)
		tput, migrated := Fig12Lines(g)
		ms := []Marker{{Sec: 0, Label: "reconfiguration start"}}
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig12ThroughputFile, name)),
			"Fig 12 "+g[0].Entry.Experiment+": sink throughput", "records/s", tput, ms)
		if err != nil {
			return paths, err
		}
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig12MigratedFile, name)),
			"Fig 12 "+g[0].Entry.Experiment+": state migrated (cumulative)", "MB", migrated, ms)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// WriteFig13 draws, per run reconfiguring several operators, the records/s
// each of them takes in and the source's Kafka lag.
func WriteFig13(dir string, runs []RunData) ([]string, error) {
	var paths []string
	var err error
	for _, r := range runs {
		if !isFig13Run(r) {
			continue
		}
		ms := runMarkers(r.FigureRun)
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig13OperatorsFile, r.name())),
			"Fig 13 "+r.Entry.Keyword+": throughput of the reconfigured operators", "records/s", operatorSeries(r), ms)
		if err != nil {
			return paths, err
		}
		paths, err = writeChart(paths, filepath.Join(dir, fmt.Sprintf(Fig13LagFile, r.name())),
			"Fig 13 "+r.Entry.Keyword+": Kafka lag", "records", []Series{lagSeries(r)}, ms)
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// Fig53Row is one line of the section 5.3 summary table.
type Fig53Row struct {
	Keyword string           `json:"keyword"`
	Windows []ReconfigWindow `json:"windows"`
	// Rebalanced runs: the busiest task's share of the operator's input in
	// the 20 s before the first reconfiguration and from 10 s to 30 s after.
	BusiestBefore float64 `json:"busiest_before,omitempty"`
	BusiestAfter  float64 `json:"busiest_after,omitempty"`
}

// Fig53Rows summarises every run with a reconfiguration.
func Fig53Rows(runs []RunData) []Fig53Row {
	var out []Fig53Row
	for _, r := range runs {
		ms := runMarkers(r.FigureRun)
		if len(ms) == 0 {
			continue
		}
		row := Fig53Row{Keyword: r.Entry.Keyword, Windows: ReconfigWindows(markerSecs(ms), r.Sink, r.Bytes)}
		if len(r.TaskIn) > 0 {
			s := ms[0].Sec
			_, row.BusiestBefore = TaskShares(r.TaskIn, s-20, s)
			_, row.BusiestAfter = TaskShares(r.TaskIn, s+10, s+30)
		}
		out = append(out, row)
	}
	return out
}

// FormatFig53Rows prints the rows as a Markdown table.
func FormatFig53Rows(rows []Fig53Row) string {
	s := "| run | # | start s | pre rec/s | min rec/s (10 s) | migrated | migration s (90 %, all) | busiest task before → after |\n|---|---|---|---|---|---|---|---|\n"
	for _, r := range rows {
		for i, w := range r.Windows {
			share := ""
			if i == 0 && (r.BusiestBefore > 0 || r.BusiestAfter > 0) {
				share = fmt.Sprintf("%.0f%% → %.0f%%", 100*r.BusiestBefore, 100*r.BusiestAfter)
			}
			s += fmt.Sprintf("| %s | %d | %.0f | %.0f | %.0f | %s | %.0f, %.0f | %s |\n", r.Keyword, w.Index, w.StartSec, w.PreTput, w.MinTput, BytesText(w.Bytes), w.Migrate90Sec, w.MigrateSec, share)
		}
	}
	return s
}
