package experiments

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"koala/activities"
	"koala/dataplane/metrics"
)

var compareHeader = []string{
	"protocol", "pre ev/s", "pre min", "min ev/s", "min/pre", "min/pre at the operator's input", "lag recovery", "peak lag",
	"pre batch p50/p99", "reconfig batch p50/p99", "worst 1 s p99, trigger +30 s", "peak per-s batch max", "pre p99 of per-s max", "migrated", "state moved", "move rate",
	"control plane", "lost", "dup", "reordered",
}

// cells renders one row's table cells (without the status note).
func (r CompareRow) cells() []string {
	if r.Status != StatusOK {
		return nil
	}
	ratio := "n/a"
	if r.MinRatio != nil {
		ratio = fmt.Sprintf("%.2f", *r.MinRatio)
		if *r.MinRatio < TargetMinRatio {
			ratio += " <0.9"
		}
	}
	rec := "n/a"
	if r.LagRecoverySec != nil {
		rec = fmt.Sprintf("%.1f s", *r.LagRecoverySec)
		if r.LagNote == LagNoRise {
			rec += " (no rise)"
		}
	} else if short := lagNoteShort[r.LagNote]; short != "" {
		rec = "n/a (" + short + ")"
	}
	lost, dup := fmt.Sprint(r.Lost), fmt.Sprint(r.Duplicated)
	if r.Lost != 0 {
		lost += " !!"
	}
	if r.Duplicated != 0 {
		dup += " !!"
	}
	reordered := fmt.Sprint(r.Reordered)
	switch {
	case r.OrderUnchecked != "":
		reordered = "n/a"
	case r.Reordered != 0:
		reordered += " !!"
	}
	moved, rate := r.stateMoveCells()
	return []string{
		r.Protocol, numOrNA(r.PreThroughput, "%.0f"), numOrNA(r.PreMinThroughput, "%.0f"), numOrNA(r.MinThroughput, "%.0f"), ratio, targetInCell(r.TargetIn), rec,
		numOrNA(r.PeakLag, "%.0f"), hdrText(r.PreBatch), hdrText(r.ReconfigBatch), triggerCell(r.TriggerP99), usOrNA(r.PeakBatchUs), usOrNA(r.PreBatchP99Us),
		BytesText(r.BytesMigrated), moved, rate, msText(r.ControlPlaneMs, len(r.Reconfigs) > 0), lost, dup, reordered,
	}
}

// stateMoveCells are the "state moved" and "move rate" cells: "12.3 MB in
// 0.16 s" and "77 MB/s" for bulk moves (stop-and-restart, DRRS); for lazy
// moves the bytes and await time, labelled, and no rate; n/a when the
// reconfigurations moved no state.
func (r CompareRow) stateMoveCells() (moved, rate string) {
	m := r.StateMove
	switch {
	case m == nil:
		return "n/a", "n/a"
	case !m.Bulk:
		return fmt.Sprintf("%s lazy, await %.2f s", BytesText(float64(m.Bytes)), m.Millis/1000), "n/a (lazy)"
	}
	return fmt.Sprintf("%s in %.2f s", BytesText(float64(m.Bytes)), m.Millis/1000), activities.RateText(float64(m.Bytes), m.Millis)
}

// movesText lists a row's state moves, one "reconfiguration step: summary"
// per move.
func (r CompareRow) movesText() string {
	var parts []string
	for _, rc := range r.Reconfigs {
		for _, m := range rc.Moves {
			parts = append(parts, fmt.Sprintf("%s %s: %s", rc.ID, m.Step, activities.MoveSummary(m.Bytes, m.Millis, m.Bulk)))
		}
	}
	return strings.Join(parts, "; ")
}

// movesHeading explains the state-moved lines.
const movesHeading = "state moved (bulk: MB/s = bytes / time from the eager handoff's start to the last new owner's migrated event; lazy: bytes migrated and the await-migration time, no rate)"

func numOrNA(v *float64, format string) string {
	if v == nil || !isFinite(*v) {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

func usOrNA(v *float64) string {
	if v == nil || !isFinite(*v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", *v/1000)
}

// hdrText is a "p50 / p99 ms" cell of HDR batch percentiles.
func hdrText(p *metrics.BatchPercentiles) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f / %.1f ms", float64(p.P50Us)/1000, float64(p.P99Us)/1000)
}

func msText(ms float64, ok bool) string {
	if !ok || !isFinite(ms) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f ms", ms)
}

// BytesText renders a byte count in B, KB, MB or GB (powers of 1000).
func BytesText(b float64) string { return activities.BytesText(b) }

func (r CompareRow) note() string {
	s := r.Status
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

func (r CompareRow) stepsText() string {
	var parts []string
	for _, rc := range r.Reconfigs {
		var steps []string
		for _, st := range rc.Steps {
			steps = append(steps, fmt.Sprintf("%s %.0f", st.Step, st.Millis))
		}
		parts = append(parts, fmt.Sprintf("%.0f ms = %s", rc.Millis, strings.Join(steps, " + ")))
	}
	return strings.Join(parts, "; ")
}

// WriteTable writes the comparison as an aligned text table, one row per
// protocol, then the control-plane steps of each run and any exactness
// violation in capitals.
func (c Comparison) WriteTable(w io.Writer) error {
	var b strings.Builder
	rows := [][]string{compareHeader}
	for _, r := range c.Rows {
		if cs := r.cells(); cs != nil {
			rows = append(rows, cs)
		}
	}
	widths := make([]int, len(compareHeader))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	line := func(row []string) {
		for i, cell := range row {
			pad := widths[i] - len([]rune(cell))
			if i == 0 {
				b.WriteString(cell + strings.Repeat(" ", pad))
			} else {
				b.WriteString("  " + strings.Repeat(" ", pad) + cell)
			}
		}
		b.WriteString("\n")
	}
	line(compareHeader)
	for _, r := range c.Rows {
		if cs := r.cells(); cs != nil {
			line(cs)
		} else {
			fmt.Fprintf(&b, "%-*s  %s\n", widths[0], r.Protocol, r.note())
		}
	}
	b.WriteString("\ncontrol plane (ms per step)\n")
	for _, r := range c.Rows {
		if r.Status == StatusOK {
			fmt.Fprintf(&b, "  %-*s  %s\n", widths[0], r.Protocol, orDash(r.stepsText()))
		}
	}
	b.WriteString(c.backlogText())
	if v := c.triggerVerdicts(); len(v) > 0 {
		b.WriteString("\nper-second p99 batch time, trigger to +30 s\n")
		for _, l := range v {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("\n" + movesHeading + "\n")
	for _, r := range c.Rows {
		if r.Status == StatusOK {
			fmt.Fprintf(&b, "  %-*s  %s\n", widths[0], r.Protocol, orText(r.movesText(), "n/a (no state moved)"))
		}
	}
	if notes := c.notes(); len(notes) > 0 {
		b.WriteString("\nnotes\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	if v := c.Violations(); len(v) > 0 {
		b.WriteString("\n!!! EXACTNESS VIOLATED (lost and duplicated must be 0): " + strings.Join(v, "; ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// notes explains, per completed run, a lag recovery that is not a number
// and a failed metrics read.
func (c Comparison) notes() []string {
	var out []string
	for _, r := range c.Rows {
		if r.Status != StatusOK {
			continue
		}
		if r.LagRecoverySec == nil && r.LagNote != "" {
			n := r.Protocol + ": lag recovery n/a: " + r.LagNote
			if r.LagNote == LagNotMeasured {
				n += " (the source's kafka_lag stayed under the threshold although the sink delivered nothing for a second or more)"
			}
			out = append(out, n)
		}
		if r.MetricsError != "" {
			out = append(out, r.Protocol+": metrics: "+r.MetricsError)
		}
		if r.BatchHDRError != "" {
			out = append(out, r.Protocol+": batch histograms: "+r.BatchHDRError)
		}
	}
	return out
}

// Markdown renders the comparison as a markdown document with the metrics
// table and the control-plane steps.
func (c Comparison) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Protocol comparison: %s\n\n", c.Experiment)
	fmt.Fprintf(&b, "Config `%s`, started %s. Each protocol ran the same experiment once, one after another.\n\n",
		c.Config, c.Started.UTC().Format(time.RFC3339))
	if c.Snapshot != nil {
		b.WriteString(c.Snapshot.Text() + "\n\n")
	}
	b.WriteString("| " + strings.Join(compareHeader, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat("---|", len(compareHeader)) + "\n")
	for _, r := range c.Rows {
		cs := r.cells()
		if cs == nil {
			cs = make([]string, len(compareHeader))
			cs[0] = r.Protocol
			cs[1] = r.note()
		}
		for i := range cs {
			cs[i] = strings.ReplaceAll(cs[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cs, " | ") + " |\n")
	}
	b.WriteString("\n## Control plane\n\n| protocol | workflow | steps (ms) |\n|---|---|---|\n")
	for _, r := range c.Rows {
		if r.Status == StatusOK {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Protocol, r.WorkflowID, orDash(r.stepsText()))
		}
	}
	b.WriteString(c.backlogMarkdown())
	if v := c.triggerVerdicts(); len(v) > 0 {
		b.WriteString("\n## Per-second p99 batch time, trigger to +30 s\n\n")
		for _, l := range v {
			b.WriteString("- " + l + "\n")
		}
	}
	b.WriteString("\n## State moved\n\n| protocol | moves |\n|---|---|\n")
	for _, r := range c.Rows {
		if r.Status == StatusOK {
			fmt.Fprintf(&b, "| %s | %s |\n", r.Protocol, strings.ReplaceAll(orText(r.movesText(), "n/a (no state moved)"), "|", `\|`))
		}
	}
	b.WriteString(c.profileMarkdown())
	if notes := c.notes(); len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	if v := c.Violations(); len(v) > 0 {
		b.WriteString("\n**EXACTNESS VIOLATED** (lost and duplicated must be 0): " + strings.Join(v, "; ") + "\n")
	}
	fmt.Fprintf(&b, "\n## Definitions\n\n"+
		"- *pre ev/s*: mean sink events/s over the seconds before the first reconfiguration, skipping the first %.0f s.\n"+
		"- *pre min*: smallest 1 s sink throughput in that window (the noise floor of *min ev/s*).\n"+
		"- *min ev/s*: minimum 1 s sink throughput from reconfiguration start to end + %.0f s (≥ %d missing seconds count as 0); *min/pre* target ≥ %.1f.\n"+
		"- *min/pre at the operator's input*: *min ev/s* / *pre ev/s* counted at the reconfigured operator's input (records_in summed over its tasks) instead of the sink, on the same windows, with the ratio of that input's lowest pre-scale second to its mean (the noise floor). The sink's figures are the issue's; this one stands beside them because a windowed or joining query's sink gets results in bursts.\n"+
		"- *lag recovery*: from reconfiguration start until the source Kafka lag is ≤ max(%.1f × pre mean, pre mean + %d) for %.0f s; \"no rise\" = it never exceeded that.\n"+
		"- *pre batch p50/p99*, *reconfig batch p50/p99*: percentiles of the processing time of individual batches of the target operator, from one HDR histogram (1 µs – 10 min, 3 significant digits) merged from its tasks' per-second histograms (`batch_time_hdr`): over the *pre ev/s* window, and over the seconds overlapping [reconfiguration start, end + %.0f s].\n"+
		"- *worst 1 s p99, trigger +30 s*: per second, the target operator's tasks' histograms of that second merged and their p99 taken, over the seconds overlapping [first reconfiguration start, +%.0f s); the cell gives the worst second, when it was, its ratio to the pre-scale p99 (*pre batch p50/p99*), and how many seconds exceeded %.0f× that p99. The per-second section checks each non-remote protocol against that and against remote's worst second.\n"+
		"- *peak per-s batch max*: max of the per-second `batch_time_max_us` of the target operator's tasks in that same window; *pre p99 of per-s max*: p%.0f of those per-task per-second maxima before the reconfiguration (per-second aggregates, not individual batches).\n"+
		"- *migrated*: sum of bytes_transferred of the target operator; *control plane*: total reconfiguration workflow time.\n"+
		"- *state moved*, *move rate*: the keyed state the reconfiguration workflows' await-migration steps report (summed over the new owners' migrated events). Bulk moves (stop-and-restart, DRRS subscales): the time is from the eager handoff's first request to the last new owner's migrated event, summed over moves, and the rate is bytes / that time (MB = 10^6 bytes). Lazy: the bytes migrated and the await-migration steps' own time; values moved while records flowed, so no rate. n/a: no state moved (stateless operator, state in the remote service, or a fetch-on-demand scale-out).\n",
		CompareWarmupSec, ResumeSlackSec, stallMissingSeconds, TargetMinRatio, LagFactor, LagSlackRecords, LagStaySec, LatencySlackSec, TriggerWindowSec, TriggerP99Factor, BatchLatencyPctl)
	return b.String()
}

// Files written by WriteFiles.
const (
	CompareJSONFile       = "compare.json"
	CompareMarkdownFile   = "compare.md"
	CompareThroughputFile = "throughput.png"
	CompareLagFile        = "kafka-lag.png"
)

// WriteFiles writes compare.json, compare.md and, when some run has
// series, the throughput and Kafka lag plots (one line per protocol, aligned
// on the reconfiguration start) into dir, and the lag plot again without a
// protocol whose lag dwarfs the others' (CompareLagOthersFile). It returns
// the paths written.
func (c Comparison) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("compare: encode json: %w", err)
	}
	p := filepath.Join(dir, CompareJSONFile)
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	paths = append(paths, p)
	p = filepath.Join(dir, CompareMarkdownFile)
	if err := os.WriteFile(p, []byte(c.Markdown()), 0o644); err != nil {
		return paths, err
	}
	paths = append(paths, p)

	var sink, lag []Series
	var markers []Marker
	for _, r := range c.Rows {
		if r.Status != StatusOK {
			continue
		}
		if len(r.SinkAligned) > 0 {
			sink = append(sink, Series{Label: r.Protocol, Points: r.SinkAligned})
		}
		if len(r.LagAligned) > 0 {
			lag = append(lag, Series{Label: r.Protocol, Points: r.LagAligned})
		}
		if len(r.ReconfigSpan) > 0 {
			sp := r.ReconfigSpan
			markers = append(markers, Marker{Sec: sp[len(sp)-1].End - sp[0].Start, Label: doneLabel(r.Protocol)})
		}
	}
	if len(sink) == 0 && len(lag) == 0 {
		return paths, nil
	}
	markers = append([]Marker{{Sec: 0, Label: "reconfiguration start"}}, markers...)
	if len(sink) > 0 {
		p = filepath.Join(dir, CompareThroughputFile)
		if err := WriteTimeSeriesPNG(p, c.Experiment+": sink throughput per protocol", "events/s", sink, markers); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	if len(lag) > 0 {
		p = filepath.Join(dir, CompareLagFile)
		title := c.Experiment + ": source Kafka lag per protocol"
		if allZero(lag) {
			title += " (all zero)"
		}
		if err := WriteTimeSeriesPNG(p, title, "records", lag, markers); err != nil {
			return paths, err
		}
		paths = append(paths, p)
		others, err := writeLagOthers(dir, c.Experiment, lag, markers)
		if err != nil {
			return paths, err
		}
		if others != "" {
			paths = append(paths, others)
		}
	}
	return paths, nil
}

// doneLabel marks the end of protocol's reconfiguration in the plots.
func doneLabel(protocol string) string { return protocol + " done" }

func allZero(series []Series) bool {
	for _, s := range series {
		for _, p := range s.Points {
			if p.Value != 0 {
				return false
			}
		}
	}
	return true
}

func orText(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
