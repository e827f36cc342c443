package experiments

import (
	"fmt"

	"koala/dataplane/metrics"
)

// The sink's per-second count is the throughput, and every figure
// keeps it. For a query whose sink gets results in bursts (a window that
// fires, a join that emits when a match arrives: q3, twitch) the sink's
// lowest second before any reconfiguration is already far below its mean,
// so its lowest second during one says little about the reconfiguration.
// The same figures counted at the reconfigured operator's input stand
// beside them: what the operator took per second, whatever it emitted.

// TargetInFigures are the throughput figures at the reconfigured
// operator's input (records_in summed over its tasks), on the same windows
// as the sink's.
type TargetInFigures struct {
	Pre    float64  `json:"pre_eps"`
	PreMin float64  `json:"pre_min_eps"`
	Min    *float64 `json:"min_eps,omitempty"`
	// MinRatio is Min / Pre; PreMinRatio is PreMin / Pre, the noise floor
	// of the pre-scale seconds.
	MinRatio    *float64 `json:"min_ratio,omitempty"`
	PreMinRatio float64  `json:"pre_min_ratio"`
}

// targetInFigures computes TargetInFigures over the windows of the sink's
// figures (ComputeRunMetrics); nil without pre-scale points. pts must be
// sorted.
func targetInFigures(pts []metrics.Point, rcs []Interval, preEnd, horizon float64) *TargetInFigures {
	mean, lo, n := WindowMean(pts, CompareWarmupSec, preEnd)
	if n == 0 || mean <= 0 {
		return nil
	}
	f := &TargetInFigures{Pre: mean, PreMin: lo, PreMinRatio: lo / mean}
	if len(rcs) == 0 {
		return f
	}
	start, end := reconfigSpan(rcs)
	if v, ok := WindowMin(pts, start, min(end+ResumeSlackSec, horizon)); ok {
		f.Min, f.MinRatio = ptr(v), ptr(v/mean)
	}
	return f
}

// targetInCell is the table cell: "0.83 (pre min 0.56)".
func targetInCell(f *TargetInFigures) string {
	switch {
	case f == nil:
		return "n/a"
	case f.MinRatio == nil:
		return fmt.Sprintf("n/a (pre min %.2f)", f.PreMinRatio)
	}
	return fmt.Sprintf("%.2f (pre min %.2f)", *f.MinRatio, f.PreMinRatio)
}
