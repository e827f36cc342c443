package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/workflows"
)

// Figures a suite can ask for with its "Figures" list. Section 5.2's
// figures (6: throughput and Kafka lag, 8: per-batch latency) are the
// default and are always written together.
var (
	KnownFigures   = []string{"6", "8", "10", "11", "12", "13", "14", "15", "16"}
	DefaultFigures = []string{"6", "8"}
)

// CheckFigures validates a "Figures" list: known names, no repeats.
func CheckFigures(figs []string) error {
	seen := map[string]bool{}
	for i, f := range figs {
		if !slices.Contains(KnownFigures, f) {
			return fmt.Errorf("Figures[%d] %q is not a figure koala draws (known: %s)", i, f, strings.Join(KnownFigures, ", "))
		}
		if seen[f] {
			return fmt.Errorf("Figures[%d] %q is listed twice", i, f)
		}
		seen[f] = true
	}
	return nil
}

// SuiteFigures reads the "Figures" list of a suite file (DefaultFigures
// when the file has none).
func SuiteFigures(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("suite: %w", err)
	}
	if IsCompareSuite(data) {
		s, err := ParseCompareSuite(path, data)
		return s.Figures, err
	}
	obj, err := strictObject(data, suiteFields)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	raw, ok := obj.fields["Figures"]
	if !ok {
		return DefaultFigures, nil
	}
	var figs []string
	if err := json.Unmarshal(raw, &figs); err != nil {
		return nil, fmt.Errorf(`%s: "Figures" must be a list of figure numbers as strings (e.g. ["10"]), got %s`, path, compact(raw))
	}
	if err := CheckFigures(figs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return figs, nil
}

// wants reports whether figs names any of names.
func wants(figs []string, names ...string) bool {
	for _, n := range names {
		if slices.Contains(figs, n) {
			return true
		}
	}
	return false
}

// RunData is a run's FigureRun plus what sections 5.3 and 5.4 plot: its
// experiment input (from the suite file; nil when unavailable) and series
// of the reconfigured operators.
type RunData struct {
	FigureRun
	Input *workflows.ExperimentInput
	// TaskIn is records_in per second of each task of the first target
	// operator (Fig 11).
	TaskIn map[string][]metrics.Point
	// OperatorIn is records_in per second of each reconfigured operator, in
	// order of first reconfiguration (Fig 13).
	OperatorIn []Series
	// Lookup is the mean over the target's tasks of key_lookup_us; KLTSize
	// and KLTBytes are sums over its tasks (Fig 15).
	Lookup   []metrics.Point
	KLTSize  []metrics.Point
	KLTBytes []metrics.Point
	// StateBytes and StateKeys describe the loaded warm-up snapshot (0:
	// none or unknown).
	StateBytes, StateKeys uint64
}

// Targets lists the reconfigured operators of a run, in order of first
// reconfiguration; a task migration without TargetOperator names its
// operator through its TaskID ("<operator>-<index>").
func Targets(reconfigs []workflows.ReconfigOutcome) []string {
	var out []string
	for _, rc := range reconfigs {
		op := rc.Spec.TargetOperator
		if i := strings.LastIndexByte(rc.Spec.TaskID, '-'); op == "" && i > 0 {
			op = rc.Spec.TaskID[:i]
		}
		if op != "" && !slices.Contains(out, op) {
			out = append(out, op)
		}
	}
	return out
}

// ReadRunData reads, on top of fr, the series the figures in figs need.
// Failed reads are added to fr.Errors; the run is still plotted.
func ReadRunData(ctx context.Context, r MetricsReader, fr FigureRun, in *workflows.ExperimentInput, figs []string) RunData {
	d := RunData{FigureRun: fr, Input: in}
	job := fr.Entry.JobID
	if job == "" {
		job = workflows.JobIDFor(fr.Entry.WorkflowID)
	}
	note := func(what string, err error) {
		if err != nil {
			d.Errors = append(d.Errors, what+": "+err.Error())
		}
	}
	if in != nil && in.Params[control.ParamLoadWarmUpData] == "true" {
		n, _ := strconv.ParseInt(in.Params[control.ParamNumEvents], 10, 64)
		if dir, err := activities.SnapshotDir(in.Params[control.ParamWarmUpSnapshotDir], in.QueryName, n); err == nil {
			if m, err := activities.ReadSnapshotManifest(dir); err == nil {
				d.StateBytes, d.StateKeys = m.Bytes, m.Keys
			} else {
				note("warm-up snapshot", err)
			}
		}
	}
	if fr.JobStart.IsZero() {
		return d
	}
	if ts := Targets(fr.Entry.Reconfigs); d.Target == "" && len(ts) > 0 {
		// A task migration names its operator only through the task id:
		// read what ReadFigureRun could not.
		d.Target = ts[0]
		var err error
		d.Bytes, err = r.ColumnSeries(ctx, job, d.Target, "bytes_transferred", metrics.AggSum)
		note("bytes_transferred", err)
		byTask, err := r.ColumnByTask(ctx, job, d.Target, "batch_time_avg_us", metrics.AggMax)
		note("batch_time_avg_us", err)
		d.BatchAvg = MeanOverTasks(byTask)
		d.BatchMax, err = r.ColumnSeries(ctx, job, d.Target, "batch_time_max_us", metrics.AggMax)
		note("batch_time_max_us", err)
		d.BatchMax = slices.DeleteFunc(d.BatchMax, func(p metrics.Point) bool { return p.Value <= 0 })
		d.BatchMaxByTask, err = r.ColumnByTask(ctx, job, d.Target, "batch_time_max_us", metrics.AggMax)
		note("batch_time_max_us by task", err)
		d.readBatchHists(ctx, r, job, note)
	}
	if d.Target == "" {
		return d
	}
	fr = d.FigureRun
	var err error
	if wants(figs, "11") {
		d.TaskIn, err = r.ColumnByTask(ctx, job, fr.Target, "records_in", metrics.AggSum)
		note("records_in by task", err)
	}
	if wants(figs, "13") {
		for _, op := range Targets(fr.Entry.Reconfigs) {
			pts, err := r.ColumnSeries(ctx, job, op, "records_in", metrics.AggSum)
			note("records_in of "+op, err)
			d.OperatorIn = append(d.OperatorIn, Series{Label: op, Points: pts})
		}
	}
	if wants(figs, "15") {
		byTask, err := r.ColumnByTask(ctx, job, fr.Target, "key_lookup_us", metrics.AggMax)
		note("key_lookup_us", err)
		d.Lookup = MeanOverTasks(byTask)
		d.KLTSize, err = r.ColumnSeries(ctx, job, fr.Target, "klt_size", metrics.AggSum)
		note("klt_size", err)
		d.KLTBytes, err = r.ColumnSeries(ctx, job, fr.Target, "klt_bytes", metrics.AggSum)
		note("klt_bytes", err)
	}
	return d
}

// WriteSuiteFigures writes the figures in figs for the runs: Fig 6/8 and
// the comparison tables via WriteFigures, then sections 5.3 (10–13) and
// 5.4 (14–16). It returns the paths written and the comparisons.
func WriteSuiteFigures(dir string, runs []RunData, figs []string) ([]string, []Comparison, error) {
	var paths []string
	var cmps []Comparison
	if wants(figs, "6", "8") {
		frs := make([]FigureRun, len(runs))
		for i, r := range runs {
			frs[i] = r.FigureRun
		}
		p, c, err := WriteFigures(dir, frs)
		paths, cmps = append(paths, p...), c
		if err != nil {
			return paths, cmps, err
		}
	}
	writers := []struct {
		fig   string
		write func(string, []RunData) ([]string, error)
	}{
		{"10", WriteFig10}, {"11", WriteFig11}, {"12", WriteFig12}, {"13", WriteFig13},
		{"14", WriteFig14}, {"15", WriteFig15}, {"16", WriteFig16},
	}
	for _, w := range writers {
		if !wants(figs, w.fig) {
			continue
		}
		p, err := w.write(dir, runs)
		paths = append(paths, p...)
		if err != nil {
			return paths, cmps, fmt.Errorf("Fig %s: %w", w.fig, err)
		}
	}
	return paths, cmps, nil
}

// runMarkers are the run's reconfiguration starts on its metric axis.
func runMarkers(fr FigureRun) []Marker {
	var out []Marker
	if fr.JobStart.IsZero() || fr.Entry.StartedAt.IsZero() {
		return out
	}
	off := fr.Entry.StartedAt.Sub(fr.JobStart).Seconds()
	for i, rc := range fr.Entry.Reconfigs {
		label := rc.Spec.Type
		if rc.Spec.TargetOperator != "" {
			label += " " + rc.Spec.TargetOperator
		}
		if rc.Spec.TargetParallelism > 0 {
			label += fmt.Sprintf("→%d", rc.Spec.TargetParallelism)
		}
		out = append(out, Marker{Sec: rc.StartSec + off, Label: fmt.Sprintf("#%d %s", i+1, label)})
	}
	return out
}

// writeChart writes one time-series PNG unless it has no points, marking
// all-zero charts in the title, and appends its path.
func writeChart(paths []string, path, title, y string, series []Series, markers []Marker) ([]string, error) {
	if !anyPoints(series) {
		return paths, nil
	}
	if allZero(series) {
		title += " (all zero)"
	}
	if err := WriteTimeSeriesPNG(path, title, y, series, markers); err != nil {
		return paths, err
	}
	return append(paths, path), nil
}

// SuiteInputs loads the suite file's configs by RunKey (nil and the error
// when the file cannot be loaded, e.g. it moved since the run).
func SuiteInputs(path string) (map[string]*workflows.ExperimentInput, error) {
	if data, err := os.ReadFile(path); err == nil && IsCompareSuite(data) {
		cs, err := ParseCompareSuite(path, data)
		if err != nil {
			return nil, err
		}
		return CompareSuiteInputs(cs)
	}
	s, err := LoadSuite(path)
	if err != nil {
		return nil, err
	}
	out := map[string]*workflows.ExperimentInput{}
	for i := range s.Input.Entries {
		e := s.Input.Entries[i]
		out[RunKey(e.Input.Name, e.Keyword)] = &e.Input
	}
	return out, nil
}

// RunKey names a suite entry by experiment and keyword: the artifact's
// suites reuse one ResultKeyword ("lazy") for every query, so the keyword
// alone does not tell their configs apart.
func RunKey(experiment, keyword string) string { return experiment + "\x00" + keyword }

// SummaryTables are the section 5.3 and 5.4 summary tables (Markdown) of
// the figures asked for; empty when neither section is.
func SummaryTables(runs []RunData, figs []string) string {
	var s string
	if wants(figs, "10", "11", "12", "13") {
		s += "Section 5.3: per reconfiguration\n\n" + FormatFig53Rows(Fig53Rows(runs)) + "\n"
	}
	if wants(figs, "14", "15", "16") {
		s += "Section 5.4: per run\n\n" + FormatFig54Rows(Fig54Rows(runs)) + "\n"
	}
	return s
}
