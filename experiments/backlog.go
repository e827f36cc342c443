package experiments

import (
	"math"

	"koala/dataplane/metrics"
)

// Backlog of an overloaded run. When the offered rate is above what the
// pre-scale parallelism sustains (`koala compare --overload`), the source
// lag grows from the start and the relative LagRecovery threshold (a
// multiple of the pre-scale mean lag) says nothing: the question is when
// the scale-out stops the growth and when the backlog is gone. "Gone" is
// back at the lag a pipeline that keeps up shows (its read-ahead and about
// a second of input): DrainLag, from the rate probe's last sustained step
// when there was one.

// Backlog notes.
const (
	BacklogNone         = "no backlog after the trigger"
	BacklogStillGrowing = "still growing at the end of the input"
	BacklogNeverDrained = "not drained by the end of the input"
	BacklogNoData       = "no lag data after the trigger"
	// BacklogNoThreshold: with no probe, the drain threshold comes from
	// the run's own pre-scale lag, which is no use when that lag grew all
	// along: its smallest second already held a backlog.
	BacklogNoThreshold   = "no drain threshold: the lag grew through the pre-scale window, so this run never showed the lag of a pipeline that keeps up (koala compare --overload probes one)"
	backlogEndWindowSecs = 2.0 // a peak this close to the end of the input counts as still growing
)

// Backlog are the backlog figures of one run, seconds from the first
// reconfiguration's start; nil is n/a (Note says why).
type Backlog struct {
	DrainLag  float64  `json:"drain_lag"` // records: at or under this the backlog is drained
	AtTrigger *float64 `json:"at_trigger"`
	// StopsGrowingSec is when the lag reached its peak (after the trigger,
	// before the end of the input).
	StopsGrowingSec *float64 `json:"stops_growing_sec"`
	// DrainedSec is when the lag was back at or under DrainLag and stayed
	// there for LagStaySec.
	DrainedSec *float64 `json:"drained_sec"`
	LeftAtEnd  *float64 `json:"left_at_end"` // lag at the last second of the input
	// HorizonSec is how long after the reconfiguration's start the input
	// ended: the longest a drain was looked for (nil: end not known).
	HorizonSec *float64 `json:"horizon_sec,omitempty"`
	Note       string   `json:"note,omitempty"`
}

// BacklogFigures computes the backlog figures of lag (sorted, cleaned
// points) for a reconfiguration starting at start; the input ends at
// horizon (+Inf: unknown). It is pure.
func BacklogFigures(lag []metrics.Point, start, horizon, drainLag float64) Backlog {
	b := Backlog{DrainLag: drainLag}
	if !math.IsInf(horizon, 1) && !math.IsNaN(horizon) {
		b.HorizonSec = ptr(horizon - start)
	}
	var w []metrics.Point
	for _, p := range lag {
		if p.Sec+1 > start && p.Sec+1 <= horizon {
			w = append(w, p)
		}
	}
	if len(w) == 0 {
		b.Note = BacklogNoData
		return b
	}
	b.AtTrigger = ptr(w[0].Value)
	b.LeftAtEnd = ptr(w[len(w)-1].Value)
	peak := 0
	for i, p := range w {
		if p.Value > w[peak].Value {
			peak = i
		}
	}
	if drainLag > 0 && w[peak].Value <= drainLag {
		b.StopsGrowingSec, b.DrainedSec, b.Note = ptr(0), ptr(0), BacklogNone
		return b
	}
	last := w[len(w)-1].Sec
	if !math.IsInf(horizon, 1) {
		last = horizon - 1
	}
	if w[peak].Sec >= last-backlogEndWindowSecs {
		b.Note = BacklogStillGrowing
		return b
	}
	b.StopsGrowingSec = ptr(max(0, w[peak].Sec-start))
	if drainLag <= 0 {
		b.Note = BacklogNoThreshold
		return b
	}
	// From the peak: a dip before the backlog built up is not its drain.
	sec, note := LagRecovery(lag, w[peak].Sec, drainLag, horizon)
	if note != LagRecovered {
		b.Note = BacklogNeverDrained
		return b
	}
	b.DrainedSec = ptr(max(0, w[peak].Sec-start) + sec)
	return b
}

// drainLagOf is the lag a pipeline that keeps up shows in this run when no
// probe measured it: LagThreshold of the smallest pre-scale second (an
// overloaded run's mean grows with its backlog; its smallest second is
// from before the backlog built up). ok is false when there is no such
// second: no points, or a lag that grew through the window by more than
// the threshold (least-squares slope times the window), so that its
// smallest second held a backlog already.
func drainLagOf(lag []metrics.Point, from, to float64) (float64, bool) {
	lo, found := 0.0, false
	var xs, ys []float64
	for _, p := range lag {
		if p.Sec >= from && p.Sec+1 <= to {
			if !found || p.Value < lo {
				lo, found = p.Value, true
			}
			xs, ys = append(xs, p.Sec), append(ys, p.Value)
		}
	}
	if !found {
		return 0, false
	}
	th := LagThreshold(lo)
	if slope, ok := Slope(xs, ys); ok && slope*(xs[len(xs)-1]-xs[0]) > th {
		return 0, false
	}
	return th, true
}

// Slope is the least-squares slope of ys over xs (units of y per unit of x);
// ok is false with fewer than two distinct xs.
func Slope(xs, ys []float64) (slope float64, ok bool) {
	n := float64(len(xs))
	if len(xs) != len(ys) || len(xs) < 2 {
		return 0, false
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}
