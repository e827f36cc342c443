package bench

import (
	"fmt"
	"math"

	"koala/dataplane/metrics"
	"koala/workflows/autoscale"
)

// The autoscale phase's figures, from one run's per-second series (pure,
// table-tested in autoscale_figures_test.go).
//
// The step is found in the source's reads, not assumed at the schedule's
// nominal second: the producers start a moment before the job's first
// metric row, which is second 0 of every series.
//
// The Kafka lag (records not yet processed by the operator after the
// source, read ahead or not) is judged in seconds of the offered input:
// lag ÷ the rate the producers offer at that second. At twice the rate
// twice as many records are in flight with no backlog at all, so a lag in
// records would never be "back" after a step up even once the job keeps
// up; in seconds it is the delay a record meets, which is what the
// autoscaler must bring back. The lag in records is reported beside it.

// StepFactorSeen is how far above the pre-step rate the source's reads
// must rise for a second to count as the step.
const StepFactorSeen = 1.4

// AutoscaleFigures are the measured figures of one autoscale run.
type AutoscaleFigures struct {
	// StepSec is the second (of the job's metric series) the source's
	// reads first showed the step; EndSec the end of the measured
	// episode (StepSec + the window, or the last second of data).
	StepSec float64 `json:"step_sec"`
	EndSec  float64 `json:"end_sec"`
	// PreReads is the source's mean reads per second before the step.
	PreReads float64 `json:"pre_reads"`
	// Seconds is the episode of the lag in seconds of offered input;
	// Records of the lag in records.
	Seconds autoscale.EpisodeStats `json:"lag_seconds"`
	Records autoscale.EpisodeStats `json:"lag_records"`
	// SinkGaps counts the seconds of the episode with no sink row (taken
	// as 0 records: tasks stopped by a reconfiguration report nothing).
	SinkGaps int `json:"sink_gaps,omitempty"`
}

// EpisodeInput is what autoscaleEpisode needs besides the series.
type EpisodeInput struct {
	PreRate, PostRate float64 // offered records/s before and after the step
	NominalStep       float64 // the schedule's step second (producer time)
	BaselineFrom      float64 // the baseline starts here (after the warm-up)
	Window            float64 // seconds after the step the episode lasts
}

// autoscaleEpisode computes the figures from the source's reads and lag
// and the sink's records per second (metrics.Point seconds of one job).
// reason is non-empty, and the figures unusable, when a series cannot
// give them.
func autoscaleEpisode(reads, lag, sink []metrics.Point, in EpisodeInput) (AutoscaleFigures, string) {
	var f AutoscaleFigures
	if !(in.PreRate > 0) || !(in.PostRate > 0) || !(in.Window > 0) {
		return f, fmt.Sprintf("bad episode input %+v", in)
	}
	n, sum, last := 0, 0.0, math.Inf(-1)
	for _, p := range reads {
		last = max(last, p.Sec)
		if p.Sec >= in.BaselineFrom && p.Sec < in.NominalStep-2 {
			sum += p.Value
			n++
		}
	}
	if n == 0 || !(sum > 0) {
		return f, fmt.Sprintf("no source reads between second %.0f and the step at about %.0f", in.BaselineFrom, in.NominalStep)
	}
	f.PreReads = sum / float64(n)
	step := math.NaN()
	for _, p := range reads {
		if p.Sec >= in.NominalStep-5 && p.Value >= StepFactorSeen*f.PreReads {
			step = p.Sec
			break
		}
	}
	if math.IsNaN(step) {
		return f, fmt.Sprintf("the source's reads never rose to %.1f × the pre-step %.0f/s after second %.0f: no step to measure", StepFactorSeen, f.PreReads, in.NominalStep-5)
	}
	f.StepSec = step
	f.EndSec = min(step+in.Window, last+1)
	if f.EndSec-step < in.Window/2 {
		return f, fmt.Sprintf("the data ends %.0f s after the step, less than half the %.0f s window", f.EndSec-step, in.Window)
	}
	var lagSec []metrics.Point
	for _, p := range lag {
		rate := in.PreRate
		if p.Sec >= step {
			rate = in.PostRate
		}
		lagSec = append(lagSec, metrics.Point{Sec: p.Sec, Value: p.Value / rate})
	}
	if len(lagSec) == 0 {
		return f, "no Kafka lag rows of the source"
	}
	sinkFilled, gaps := fillSeconds(sink, step, f.EndSec)
	f.SinkGaps = gaps
	f.Seconds = autoscale.Episode(lagSec, sinkFilled, in.BaselineFrom, step, f.EndSec)
	f.Records = autoscale.Episode(lag, sinkFilled, in.BaselineFrom, step, f.EndSec)
	if !(f.Seconds.PreThroughput > 0) {
		return f, "no sink records before the step"
	}
	return f, ""
}

// fillSeconds returns s with a 0 for every whole second in [from, to)
// that has no point, and how many it added.
func fillSeconds(s []metrics.Point, from, to float64) ([]metrics.Point, int) {
	have := map[float64]bool{}
	for _, p := range s {
		have[p.Sec] = true
	}
	out := append([]metrics.Point(nil), s...)
	gaps := 0
	for sec := from; sec < to; sec++ {
		if !have[sec] {
			out = append(out, metrics.Point{Sec: sec})
			gaps++
		}
	}
	return out, gaps
}
