package autoscale

import (
	"math"

	"koala/dataplane/metrics"
)

// EpisodeStats is how a job rode out a rate step: the numbers of the
// bench row "seconds from a 2× step to lag back at baseline".
type EpisodeStats struct {
	// BaselineLag is the largest Kafka lag in [BaselineFrom, Step): what
	// is in flight at the rate before the step.
	BaselineLag float64 `json:"baseline_lag"`
	// PeakLag is the largest lag in [Step, End), at PeakSec.
	PeakLag float64 `json:"peak_lag"`
	PeakSec float64 `json:"peak_sec"`
	// RecoveredSec is the time from the step to the first second after
	// the peak whose lag is back at or below BaselineLag (0 when the lag
	// never rose above it); Recovered is false when that never happened
	// before End.
	RecoveredSec float64 `json:"recovered_sec"`
	Recovered    bool    `json:"recovered"`
	// PreThroughput is the mean throughput in [BaselineFrom, Step);
	// MinThroughput the lowest 1 s throughput in [Step, End).
	PreThroughput float64 `json:"pre_throughput"`
	MinThroughput float64 `json:"min_throughput"`
}

// MinOverPre is MinThroughput / PreThroughput (0 without a pre rate).
func (e EpisodeStats) MinOverPre() float64 {
	if !(e.PreThroughput > 0) {
		return 0
	}
	return e.MinThroughput / e.PreThroughput
}

// Episode measures a step at second step from per-second lag and
// throughput series (metrics.Point seconds, e.g. ClickHouse.Lag and
// ClickHouse.Throughput of the sink): the baseline before it, from
// baselineFrom, and the recovery until end.
func Episode(lag, throughput []metrics.Point, baselineFrom, step, end float64) EpisodeStats {
	var e EpisodeStats
	for _, p := range lag {
		switch {
		case p.Sec >= baselineFrom && p.Sec < step:
			e.BaselineLag = max(e.BaselineLag, p.Value)
		case p.Sec >= step && p.Sec < end && p.Value > e.PeakLag:
			e.PeakLag, e.PeakSec = p.Value, p.Sec
		}
	}
	if e.PeakLag <= e.BaselineLag {
		e.Recovered = true
	} else {
		for _, p := range lag {
			if p.Sec > e.PeakSec && p.Sec < end && p.Value <= e.BaselineLag {
				e.Recovered, e.RecoveredSec = true, p.Sec-step
				break
			}
		}
	}
	var sum float64
	n := 0
	e.MinThroughput = math.Inf(1)
	for _, p := range throughput {
		switch {
		case p.Sec >= baselineFrom && p.Sec < step:
			sum += p.Value
			n++
		case p.Sec >= step && p.Sec < end:
			e.MinThroughput = min(e.MinThroughput, p.Value)
		}
	}
	if n > 0 {
		e.PreThroughput = sum / float64(n)
	}
	if math.IsInf(e.MinThroughput, 1) {
		e.MinThroughput = 0
	}
	return e
}
