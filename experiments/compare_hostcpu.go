package experiments

import (
	"fmt"

	"koala/dataplane/metrics"
)

// HostCPUFigures is how busy this machine's processors were around the
// first reconfiguration, in cores (busy CPU seconds per second), from the
// host samples of the run (hostcpu). A backlog can drain after a scale-out
// only with cores left over; Pre near CPUs says the pre-scale pipeline and
// its load generators already used the whole machine.
type HostCPUFigures struct {
	CPUs int `json:"cpus"`
	// Pre is the mean over the pre-scale window (the window of
	// PreThroughput); After over [trigger, trigger + TriggerWindowSec),
	// cut at the end of the input. nil: no sample there.
	Pre   *float64 `json:"pre_cores,omitempty"`
	After *float64 `json:"after_cores,omitempty"`
	// NotMeasured says why there are no figures (no samples, no /proc/stat).
	NotMeasured string `json:"not_measured,omitempty"`
}

// hostCPUFigures computes the figures from busy cores per second on the
// metric axis; preFrom/preEnd is the pre-scale window, start the first
// reconfiguration's start (NaN without one), horizon the input's end.
func hostCPUFigures(busy []metrics.Point, cpus int, why string, preFrom, preEnd, start, horizon float64) *HostCPUFigures {
	if why == "" && len(busy) == 0 {
		return nil
	}
	f := &HostCPUFigures{CPUs: cpus, NotMeasured: why}
	if why != "" {
		return f
	}
	pts := CleanPoints(busy)
	if mean, _, n := WindowMean(pts, preFrom, preEnd); n > 0 {
		f.Pre = ptr(mean)
	}
	if isFinite(start) {
		if mean, _, n := WindowMean(pts, start, min(start+TriggerWindowSec, horizon)); n > 0 {
			f.After = ptr(mean)
		}
	}
	return f
}

// text is the backlog table's cell: "1.93 / 1.98 of 2".
func (f *HostCPUFigures) text() string {
	if f == nil {
		return "not measured"
	}
	if f.NotMeasured != "" {
		return "not measured (" + f.NotMeasured + ")"
	}
	cell := func(v *float64) string {
		if v == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", *v)
	}
	return fmt.Sprintf("%s / %s of %d", cell(f.Pre), cell(f.After), f.CPUs)
}
