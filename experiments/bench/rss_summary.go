package bench

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"koala/experiments"
)

// RSS under backpressure: the keyed counter is offered well above its
// ceiling, so the backlog grows in Kafka; the workers' resident set must not
// grow with it (the source reads only what the pipeline takes). The run
// shows backpressure only if the Kafka lag grew through its window (the
// source's lag counts what it read but the pipeline has not processed);
// when it did not, the pipeline kept up and RSS flatness is not measured.

// TargetRSSGrowth is the largest allowed growth of a worker's RSS over the
// last half of the run, as a fraction of its mean there.
const TargetRSSGrowth = 0.10

// ParseVmRSS returns VmRSS in bytes from the contents of /proc/<pid>/status.
func ParseVmRSS(status string) (int64, error) {
	for _, l := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(l, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q: want \"<n> kB\"", l)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("VmRSS line %q: bad number", l)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line (kernel thread or exited process?)")
}

// ProcRSS reads the VmRSS of pid in bytes.
func ProcRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return ParseVmRSS(string(b))
}

// RSSSample is one worker's resident set at one time.
type RSSSample struct {
	At    time.Time `json:"at"`
	Bytes int64     `json:"bytes"`
}

// WorkerRSS is the RSS figures of one worker over the run.
type WorkerRSS struct {
	Worker  string  `json:"worker"`
	PID     int     `json:"pid"`
	Samples int     `json:"samples"`
	MaxMB   float64 `json:"max_mb"`
	// Over the last half of the samples: mean, least-squares slope, and the
	// growth the slope amounts to over that half as a fraction of the mean.
	LastHalfMeanMB  float64 `json:"last_half_mean_mb"`
	SlopeMBPerSec   float64 `json:"slope_mb_per_sec"`
	LastHalfGrowth  float64 `json:"last_half_growth"`
	LastHalfSeconds float64 `json:"last_half_sec"`
	Verdict         string  `json:"verdict"`
}

// SummarizeRSS computes one worker's figures from its samples (in time
// order). With fewer than 4 samples the verdict is unknown.
func SummarizeRSS(worker string, pid int, ss []RSSSample) WorkerRSS {
	w := WorkerRSS{Worker: worker, PID: pid, Samples: len(ss), Verdict: VerdictUnknown}
	for _, s := range ss {
		w.MaxMB = math.Max(w.MaxMB, float64(s.Bytes)/(1<<20))
	}
	if len(ss) < 4 {
		return w
	}
	half := ss[len(ss)/2:]
	xs, ys := make([]float64, len(half)), make([]float64, len(half))
	var sum float64
	for i, s := range half {
		xs[i] = s.At.Sub(half[0].At).Seconds()
		ys[i] = float64(s.Bytes) / (1 << 20)
		sum += ys[i]
	}
	w.LastHalfMeanMB = sum / float64(len(half))
	w.LastHalfSeconds = xs[len(xs)-1]
	slope, ok := experiments.Slope(xs, ys)
	if !ok || w.LastHalfMeanMB <= 0 {
		return w
	}
	w.SlopeMBPerSec = slope
	w.LastHalfGrowth = slope * w.LastHalfSeconds / w.LastHalfMeanMB
	w.Verdict = verdict(w.LastHalfGrowth <= TargetRSSGrowth)
	return w
}

// RSSRun is the backpressure phase: the counter offered far above its
// ceiling, with every worker's RSS sampled each second.
type RSSRun struct {
	Query        string              `json:"query"`
	Rate         int                 `json:"rate_per_sec"`
	RuntimeSec   int                 `json:"runtime_sec"`
	WorkflowID   string              `json:"workflow_id,omitempty"`
	JobID        string              `json:"job_id,omitempty"`
	Status       string              `json:"status"`
	Reason       string              `json:"reason,omitempty"`
	Produced     int64               `json:"produced"`
	SinkEvents   float64             `json:"sink_events"`
	LagRead      bool                `json:"lag_read"`     // false: no ClickHouse, or no lag rows
	LagAtStart   float64             `json:"lag_at_start"` // the source tasks' kafka_lag at the window's start,
	LagAtHalf    float64             `json:"lag_at_half"`  // half time
	LagAtEnd     float64             `json:"lag_at_end"`   // and end
	Workers      []WorkerRSS         `json:"workers"`
	SamplesByPID map[int][]RSSSample `json:"samples,omitempty"`
}

// LagGrowth reports whether the Kafka lag grew through the window, and
// when not, why the run shows no backpressure. Each half must add at least
// one second of the offered rate: the lag of a pipeline that keeps up
// moves by about what its sources read ahead, less than that at the
// rates this phase offers.
func (r RSSRun) LagGrowth() (grew bool, why string) {
	if !r.LagRead {
		return false, "Kafka lag not read (no ClickHouse metrics for the run)"
	}
	step := float64(max(r.Rate, 1))
	if r.LagAtHalf-r.LagAtStart < step || r.LagAtEnd-r.LagAtHalf < step {
		return false, fmt.Sprintf("Kafka lag did not grow through the window (%.0f → %.0f → %.0f; each half must add ≥ %.0f, one second of the offered rate): the pipeline kept up, so nothing was under backpressure",
			r.LagAtStart, r.LagAtHalf, r.LagAtEnd, step)
	}
	return true, ""
}

// lagText is the lag at the window's start, half time and end.
func (r RSSRun) lagText() string {
	if !r.LagRead {
		return "Kafka lag not read"
	}
	return fmt.Sprintf("Kafka lag %.0f → %.0f → %.0f (start, half, end)", r.LagAtStart, r.LagAtHalf, r.LagAtEnd)
}

// Verdict is met when the lag grew (backpressure) and every worker's RSS
// is flat over the last half, missed when one grew more than
// TargetRSSGrowth, unknown without figures or without backpressure.
func (r RSSRun) Verdict() string {
	if r.Status != experiments.StatusOK || len(r.Workers) == 0 {
		return VerdictUnknown
	}
	if grew, _ := r.LagGrowth(); !grew {
		return VerdictUnknown
	}
	v := VerdictMet
	for _, w := range r.Workers {
		switch w.Verdict {
		case VerdictMissed:
			return VerdictMissed
		case VerdictUnknown:
			v = VerdictUnknown
		}
	}
	return v
}
