package experiments

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"koala/dataplane/metrics"
	"koala/workflows"
)

// Summary is the outcome of one experiment run, as printed at its end.
type Summary struct {
	Experiment, WorkflowID, RunID, UIURL string

	Produced, SinkReceived, SinkDistinct, Lost, Duplicated int64
	// ExactnessUnchecked is why the sink ledger could not check the run
	// (Lost and Duplicated are then not printed as numbers).
	ExactnessUnchecked string
	// Reordered counts records that reached the sink after a later record
	// of their key; OrderUnchecked is why the run could not check order.
	Reordered      int64
	OrderUnchecked string

	// ThroughputBefore and ThroughputAfter are events/s at the sink before
	// the first reconfiguration and after the last one finished.
	ThroughputBefore, ThroughputAfter float64
	// MinThroughputDuring is the minimum 1 s throughput between the first
	// reconfiguration start and the last reconfiguration end.
	MinThroughputDuring float64

	Reconfigs []ReconfigSummary
	Elapsed   time.Duration
	PlotPath  string
}

// ReconfigSummary is one reconfiguration: its id, protocol, total time,
// the time of each step and the keyed state it moved.
type ReconfigSummary struct {
	ID, Protocol string
	Millis       float64
	Steps        []StepSummary
	// Moves are the workflow's state moves (workflows.StateMove), one per
	// await-migration step.
	Moves []workflows.StateMove `json:",omitempty"`
}

// StepSummary is the duration of one step of a reconfiguration.
type StepSummary struct {
	Step   string
	Millis float64
}

// summaryKeyWidth is the width of the label column of WriteText.
const summaryKeyWidth = 13

// WriteText writes the summary as an aligned, human-readable block. Its last
// two lines are "lost=N duplicated=M reordered=R" (n/a with the reason when
// the query cannot be checked by the sink ledger) and the Temporal UI link.
func (s Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	kv := func(key, format string, args ...any) {
		fmt.Fprintf(&b, "%-*s%s\n", summaryKeyWidth, key, fmt.Sprintf(format, args...))
	}
	kv("experiment", "%s", orDash(s.Experiment))
	kv("workflow", "%s", orDash(s.WorkflowID))
	kv("run", "%s", orDash(s.RunID))
	kv("elapsed", "%s", s.Elapsed.Round(time.Millisecond))
	kv("records", "produced %d, sink received %d, distinct %d", s.Produced, s.SinkReceived, s.SinkDistinct)
	kv("throughput", "before %s, min during %s, after %s",
		rate(s.ThroughputBefore), rate(s.MinThroughputDuring), rate(s.ThroughputAfter))

	if len(s.Reconfigs) == 0 {
		kv("reconfigs", "none")
	} else {
		kv("reconfigs", "%d", len(s.Reconfigs))
		idW, protoW, stepW := 0, 0, 0
		for _, r := range s.Reconfigs {
			idW = max(idW, len(r.ID))
			protoW = max(protoW, len(r.Protocol))
			for _, st := range r.Steps {
				stepW = max(stepW, len(st.Step))
			}
		}
		nameW := max(idW+2+protoW, 2+stepW)
		indent := strings.Repeat(" ", summaryKeyWidth)
		for _, r := range s.Reconfigs {
			head := fmt.Sprintf("%-*s  %s", idW, r.ID, r.Protocol)
			fmt.Fprintf(&b, "%s%-*s  %s\n", indent, nameW, head, millis(r.Millis))
			for _, st := range r.Steps {
				fmt.Fprintf(&b, "%s%-*s  %s\n", indent, nameW, "  "+st.Step, millis(st.Millis))
			}
		}
	}
	if s.PlotPath != "" {
		kv("plot", "%s", s.PlotPath)
	}
	switch {
	case s.ExactnessUnchecked != "":
		fmt.Fprintf(&b, "lost=n/a duplicated=n/a reordered=n/a (not checked at run time: %s)\n", s.ExactnessUnchecked)
	case s.OrderUnchecked != "":
		fmt.Fprintf(&b, "lost=%d duplicated=%d reordered=n/a (order not checked: %s)\n", s.Lost, s.Duplicated, s.OrderUnchecked)
	default:
		fmt.Fprintf(&b, "lost=%d duplicated=%d reordered=%d\n", s.Lost, s.Duplicated, s.Reordered)
	}
	fmt.Fprintf(&b, "ui: %s\n", orDash(s.UIURL))
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func rate(v float64) string {
	if !isFinite(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ev/s", v)
}

func millis(v float64) string {
	if !isFinite(v) {
		return "n/a"
	}
	return fmt.Sprintf("%10.1f ms", v)
}

// throughputWarmupSec is how much of the start of a series ThroughputWindows
// ignores.
const throughputWarmupSec = 2

// ThroughputWindows splits a per-second throughput series around a
// reconfiguration interval [reconfigStart, reconfigEnd] (seconds on the same
// axis as the points; a point at Sec s covers [s, s+1)). It is pure:
//
//   - before is the mean of the seconds that end by reconfigStart, ignoring
//     the first 2 s of the series (warm-up);
//   - during is the minimum over the seconds that overlap the interval;
//   - after is the mean of the seconds that start at or after reconfigEnd,
//     ignoring the last second of the series (it may be partial).
//
// A window without points yields 0. Missing seconds are not treated as zero.
func ThroughputWindows(points []metrics.Point, reconfigStart, reconfigEnd float64) (before, during, after float64) {
	pts := make([]metrics.Point, 0, len(points))
	for _, p := range points {
		if isFinite(p.Sec) && isFinite(p.Value) {
			pts = append(pts, p)
		}
	}
	if len(pts) == 0 {
		return 0, 0, 0
	}
	slices.SortStableFunc(pts, func(a, b metrics.Point) int {
		switch {
		case a.Sec < b.Sec:
			return -1
		case a.Sec > b.Sec:
			return 1
		}
		return 0
	})
	first, last := pts[0].Sec, pts[len(pts)-1].Sec
	hi := reconfigEnd
	if hi <= reconfigStart {
		hi = math.Nextafter(reconfigStart, math.Inf(1)) // an instant: the second containing it
	}

	var sumB, sumA float64
	var nB, nA int
	during = math.Inf(1)
	for _, p := range pts {
		s := p.Sec
		if s >= first+throughputWarmupSec && s+1 <= reconfigStart {
			sumB += p.Value
			nB++
		}
		if s < hi && s+1 > reconfigStart {
			during = min(during, p.Value)
		}
		if s >= reconfigEnd && s < last {
			sumA += p.Value
			nA++
		}
	}
	if nB > 0 {
		before = sumB / float64(nB)
	}
	if nA > 0 {
		after = sumA / float64(nA)
	}
	if math.IsInf(during, 1) {
		during = 0
	}
	return before, during, after
}
