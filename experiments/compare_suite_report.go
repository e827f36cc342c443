package experiments

import (
	"fmt"
	"strings"
)

// TargetDrainSpeedup is how many times faster than stop-and-restart's
// lazy's backlog is to drain (section 5.2 at scale).
const TargetDrainSpeedup = 3.0

// CompareSuiteTable is the comparison suite's targets table (Markdown):
// one line per comparison, lazy's figures checked against the targets and
// against the other protocols of the same comparison, with the state size,
// offered rate and backlog at the trigger beside them. It is pure.
func CompareSuiteTable(cmps []Comparison) string {
	var b strings.Builder
	b.WriteString("| experiment | state | offered (probe sustained) | lazy backlog at trigger | lazy lowest 1 s ÷ pre (pre floor) | p99 s > 2× pre | worst p99 s: lazy / remote | drained: lazy / S&R / DRRS / remote | lazy drain vs S&R | drain rate after the peak, K rec/s: lazy / S&R / DRRS | lazy run: CPU busy before / after |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cmps {
		lazy, sar := c.row(VariantLazy), c.row(VariantStopAndRestart)
		drrs, remote := c.row(VariantDRRS), c.row(VariantRemote)
		cells := []string{c.Experiment, stateCell(c.Load), offeredCell(c.Load)}
		if lazy == nil {
			cells = append(cells, "no lazy run", "", "", "", "", "", "", "")
		} else {
			cells = append(cells, backlogAtTrigger(lazy), minRatioCell(lazy), p99OverCell(lazy), worstP99Cell(lazy, remote),
				strings.Join([]string{drainedCell(lazy), drainedCell(sar), drainedCell(drrs), drainedCell(remote)}, " / "),
				drainSpeedupCell(lazy, sar),
				strings.Join([]string{drainRateCell(lazy), drainRateCell(sar), drainRateCell(drrs)}, " / "),
				lazy.HostCPU.text())
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	fmt.Fprintf(&b, "\nTargets (lazy): lowest 1 s ≥ %.1f × pre; no second of [trigger, +%d s) with a p99 batch time over %.0f × pre's, and the worst below remote's; the backlog drained ≥ %.0f × faster than stop-and-restart's. Drains are seconds after the reconfiguration's start (\"no\": not drained when the input ended). The drain rate stands beside the issue's drain check because the protocols' runs build different backlogs before the trigger (each is its own run, and the pre-scale seconds vary): records of lag removed per second from the peak until drained (or until the input ended). The CPU column is this machine's busy cores during the lazy run (every process: pipeline, producers, Kafka, ClickHouse, Temporal), over its pre-scale seconds and the %d s from the trigger: a scale-out drains a backlog only with cores left over. A row is from one `koala compare` run of the suite; its compare.md has every figure.\n",
		TargetMinRatio, int(TriggerWindowSec), TriggerP99Factor, TargetDrainSpeedup, int(TriggerWindowSec))
	return b.String()
}

// row is the completed run of protocol variant, nil when there is none.
func (c Comparison) row(variant string) *CompareRow {
	for i := range c.Rows {
		if c.Rows[i].Protocol == variant && c.Rows[i].Status == StatusOK {
			return &c.Rows[i]
		}
	}
	return nil
}

func stateCell(l *OfferedLoad) string {
	if l == nil || l.StateBytes == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f GB", float64(l.StateBytes)/1e9)
}

func offeredCell(l *OfferedLoad) string {
	if l == nil {
		return "config's rate"
	}
	if l.Error != "" {
		return fmt.Sprintf("%d ev/s (probe failed)", l.Rate)
	}
	return fmt.Sprintf("%d ev/s (%d)", l.Rate, l.Sustainable)
}

func backlogAtTrigger(r *CompareRow) string {
	if r.Backlog == nil || r.Backlog.AtTrigger == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f", *r.Backlog.AtTrigger)
}

func minRatioCell(r *CompareRow) string {
	if r.MinRatio == nil {
		return "not measured"
	}
	verdict := "met"
	if *r.MinRatio < TargetMinRatio {
		verdict = "missed"
	}
	floor := ""
	if r.PreThroughput != nil && r.PreMinThroughput != nil && *r.PreThroughput > 0 {
		floor = fmt.Sprintf(" (%.2f)", *r.PreMinThroughput / *r.PreThroughput)
	}
	return fmt.Sprintf("%.2f%s %s", *r.MinRatio, floor, verdict)
}

func p99OverCell(r *CompareRow) string {
	t := r.TriggerP99
	if t == nil {
		return "not measured"
	}
	verdict := "met"
	if t.Over > 0 {
		verdict = "missed"
	}
	return fmt.Sprintf("%d/%d %s", t.Over, t.Seconds, verdict)
}

func worstP99Cell(lazy, remote *CompareRow) string {
	if lazy.TriggerP99 == nil {
		return "not measured"
	}
	l := lazy.TriggerP99.WorstUs / 1000
	if remote == nil || remote.TriggerP99 == nil {
		return fmt.Sprintf("%.1f ms / no remote run", l)
	}
	r := remote.TriggerP99.WorstUs / 1000
	verdict := "met"
	if l >= r {
		verdict = "missed"
	}
	return fmt.Sprintf("%.1f / %.1f ms %s", l, r, verdict)
}

func drainedCell(r *CompareRow) string {
	switch {
	case r == nil:
		return "—"
	case r.Backlog == nil:
		return "not measured"
	case r.Backlog.DrainedSec != nil:
		return fmt.Sprintf("+%.0f s", *r.Backlog.DrainedSec)
	case r.Backlog.Note == BacklogNoThreshold:
		return "no threshold"
	}
	return "no"
}

// drainSpeedupCell compares lazy's drain with stop-and-restart's: their
// ratio when both drained, a lower bound (the input's end) when only lazy
// did.
func drainSpeedupCell(lazy, sar *CompareRow) string {
	if lazy.Backlog == nil || sar == nil || sar.Backlog == nil {
		return "not measured"
	}
	ld, sd := lazy.Backlog.DrainedSec, sar.Backlog.DrainedSec
	switch {
	case lazy.Backlog.Note == BacklogNoThreshold || sar.Backlog.Note == BacklogNoThreshold:
		return "no drain threshold: not measured"
	case ld == nil:
		return "lazy not drained: missed"
	case *ld <= 0:
		return "no backlog: not tested"
	case sd != nil:
		x := *sd / *ld
		return fmt.Sprintf("%.1f× %s", x, verdictAtLeast(x, TargetDrainSpeedup))
	case sar.Backlog.HorizonSec != nil:
		x := *sar.Backlog.HorizonSec / *ld
		return fmt.Sprintf("> %.1f× (S&R not drained by +%.0f s) %s", x, *sar.Backlog.HorizonSec, verdictAtLeast(x, TargetDrainSpeedup))
	}
	return "S&R not drained: ratio not known"
}

func verdictAtLeast(x, target float64) string {
	if x >= target {
		return "met"
	}
	return "not shown"
}

// drainRateCell is how fast r's backlog went down after its peak, in
// thousands of records of lag per second: from the peak to the drain (down
// to the drain threshold), or to the end of the input when it did not
// drain.
func drainRateCell(r *CompareRow) string {
	if r == nil || r.Backlog == nil || r.PeakLag == nil || r.Backlog.StopsGrowingSec == nil {
		return "—"
	}
	bl := r.Backlog
	from, to, end := *bl.StopsGrowingSec, 0.0, 0.0
	switch {
	case bl.DrainedSec != nil:
		to, end = *bl.DrainedSec, bl.DrainLag
	case bl.HorizonSec != nil && bl.LeftAtEnd != nil:
		to, end = *bl.HorizonSec, *bl.LeftAtEnd
	default:
		return "—"
	}
	if to <= from || *r.PeakLag <= end {
		return "—"
	}
	return fmt.Sprintf("%.1f", (*r.PeakLag-end)/(to-from)/1000)
}
