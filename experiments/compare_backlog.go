package experiments

import (
	"fmt"
	"strings"
)

// OfferedLoad is how `koala compare --overload` set the rate every
// protocol ran at: Share × the rate the pre-scale pipeline sustained in
// the probe run before them.
type OfferedLoad struct {
	Rate          int     `json:"rate"` // events/s offered to every protocol
	Share         float64 `json:"share"`
	Sustainable   int     `json:"sustainable"` // probed, events/s
	Limit         string  `json:"limit"`       // what ended the probe's staircase
	ProbeWorkflow string  `json:"probe_workflow,omitempty"`
	DrainLag      float64 `json:"drain_lag"` // records: the lag while the probe's pipeline kept up, as a drain threshold
	Error         string  `json:"error,omitempty"`
	// StateBytes is the warm-up snapshot every run loaded (0: none).
	StateBytes uint64 `json:"state_bytes,omitempty"`
}

func (l OfferedLoad) text() string {
	var b strings.Builder
	if l.Error != "" {
		fmt.Fprintf(&b, "offered %d ev/s, the config's rate: the probe found no sustainable rate (%s)", l.Rate, l.Error)
	} else {
		fmt.Fprintf(&b, "offered %d ev/s = %.2f × the %d ev/s the pre-scale pipeline sustained in the probe run %s (%s); backlog drained at ≤ %.0f records of lag",
			l.Rate, l.Share, l.Sustainable, l.ProbeWorkflow, l.Limit, l.DrainLag)
	}
	if l.StateBytes > 0 {
		fmt.Fprintf(&b, "; every run loaded %s of warm-up state", BytesText(float64(l.StateBytes)))
	}
	return b.String()
}

var backlogHeader = []string{"protocol", "produced ev/s", "lag at trigger", "peak lag", "stops growing", "drained", "left at end", "drain at ≤", "CPU busy before / after"}

// backlogCells is one row of the backlog table; nil for a run that did not
// complete or had no reconfiguration.
func (r CompareRow) backlogCells() []string {
	b := r.Backlog
	if r.Status != StatusOK || b == nil {
		return nil
	}
	sec := func(v *float64) string {
		if v == nil {
			return "n/a"
		}
		return fmt.Sprintf("+%.0f s", *v)
	}
	grow, drained := sec(b.StopsGrowingSec), sec(b.DrainedSec)
	switch b.Note {
	case BacklogStillGrowing:
		grow, drained = "never", "no"
	case BacklogNeverDrained:
		drained = "no"
	case BacklogNone:
		grow, drained = "no backlog", "no backlog"
	case BacklogNoThreshold:
		drained = "no threshold"
	}
	drainAt := "n/a"
	if b.DrainLag > 0 {
		drainAt = fmt.Sprintf("%.0f", b.DrainLag)
	}
	produced := "n/a"
	if r.InputSec > 0 {
		produced = fmt.Sprintf("%.0f", float64(r.Produced)/r.InputSec)
	}
	return []string{r.Protocol, produced, numOrNA(b.AtTrigger, "%.0f"), numOrNA(r.PeakLag, "%.0f"), grow, drained, numOrNA(b.LeftAtEnd, "%.0f"), drainAt, r.HostCPU.text()}
}

// backlogText is the backlog section of the text table ("" when no row
// has one).
func (c Comparison) backlogText() string {
	var rows [][]string
	for _, r := range c.Rows {
		if cs := r.backlogCells(); cs != nil {
			rows = append(rows, cs)
		}
	}
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nbacklog (source Kafka lag, records; seconds after the reconfiguration start)\n")
	if c.Load != nil {
		b.WriteString("  " + c.Load.text() + "\n")
	}
	widths := make([]int, len(backlogHeader))
	for _, row := range append([][]string{backlogHeader}, rows...) {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for _, row := range append([][]string{backlogHeader}, rows...) {
		b.WriteString(" ")
		for i, cell := range row {
			fmt.Fprintf(&b, " %*s", widths[i], cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// backlogMarkdown is the backlog section of compare.md.
func (c Comparison) backlogMarkdown() string {
	var b strings.Builder
	for _, r := range c.Rows {
		if cs := r.backlogCells(); cs != nil {
			b.WriteString("| " + strings.Join(cs, " | ") + " |\n")
		}
	}
	if b.Len() == 0 {
		return ""
	}
	head := "\n## Backlog\n\n"
	if c.Load != nil {
		head += c.Load.text() + ".\n\n"
	}
	head += "*produced ev/s*: what the producers managed over the input (below the offered rate when they could not keep up). Source Kafka lag (records read ahead but not processed included), seconds after the first reconfiguration's start, up to the end of the input: *stops growing* when the lag peaked, *drained* when it was back at or under *drain at ≤* (the lag of the pipeline keeping up: from the rate probe's last sustained step, else " +
		fmt.Sprintf("max(%.1f × the run's smallest pre-scale second, it + %d), n/a when the run's lag grew through the pre-scale window by more than that", LagFactor, LagSlackRecords) + ") and stayed there " + fmt.Sprintf("%.0f s", LagStaySec) + ". " +
		fmt.Sprintf("*CPU busy before / after*: this machine's busy cores (/proc/stat: busy CPU seconds per second, every process on it: the pipeline, its producers, Kafka, ClickHouse, Temporal), mean over the pre-scale seconds and over the %.0f s from the trigger; a backlog drains after a scale-out only with cores left over.\n\n", TriggerWindowSec)
	head += "| " + strings.Join(backlogHeader, " | ") + " |\n|" + strings.Repeat("---|", len(backlogHeader)) + "\n"
	return head + b.String()
}
