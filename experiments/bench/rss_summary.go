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
// grow with it (the source reads only what the pipeline takes).

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
	slope, ok := Slope(xs, ys)
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
	StartLag     float64             `json:"start_kafka_lag"` // at half time
	EndLag       float64             `json:"end_kafka_lag"`
	Workers      []WorkerRSS         `json:"workers"`
	SamplesByPID map[int][]RSSSample `json:"samples,omitempty"`
}

// Verdict is met when every worker's RSS is flat over the last half, missed
// when one grew more than TargetRSSGrowth, unknown without figures.
func (r RSSRun) Verdict() string {
	if r.Status != experiments.StatusOK || len(r.Workers) == 0 {
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
