package experiments

import (
	"fmt"
	"strings"

	"koala/dataplane/metrics"
)

// The issue-style latency figure of a reconfiguration: per second, the
// histograms of the target operator's tasks merged into one and its p99
// taken, over the seconds from the trigger to TriggerWindowSec after it.
// The pooled p99 of the reconfiguration window (ReconfigBatch) hides a bad
// second among many good ones; this one reports the worst second.

const (
	TriggerWindowSec = 30.0 // seconds after the trigger whose per-second p99 are checked
	TriggerP99Factor = 2.0  // a second's p99 above this × the pre-scale p99 counts as a spike
)

// TriggerP99 is the per-second p99 batch time over [trigger, trigger +
// TriggerWindowSec).
type TriggerP99 struct {
	// WorstUs is the largest per-second p99 in the window, at WorstSec
	// seconds after the trigger.
	WorstUs  float64 `json:"worst_us"`
	WorstSec float64 `json:"worst_sec"`
	// Seconds is how many seconds in the window had batches; Over how many
	// of them had a p99 above TriggerP99Factor × PreP99Us.
	Seconds int `json:"seconds"`
	Over    int `json:"over"`
	// PreP99Us is the pre-scale p99 it is checked against (the pooled
	// histogram of the pre-scale seconds, RunMetrics.PreBatch).
	PreP99Us float64 `json:"pre_p99_us"`
}

// triggerP99 computes TriggerP99 from the per-task per-second histograms;
// nil when no second of the window had a batch or there is no pre-scale
// p99.
func triggerP99(samples []metrics.BatchHistSample, trigger float64, pre *metrics.BatchPercentiles) (*TriggerP99, error) {
	if pre == nil || pre.P99Us <= 0 || !isFinite(trigger) {
		return nil, nil
	}
	var in []metrics.BatchHistSample
	for _, s := range samples {
		if isFinite(s.Sec) && s.Sec+1 > trigger && s.Sec < trigger+TriggerWindowSec {
			in = append(in, s)
		}
	}
	_, p99, err := BatchPercentilesPerSecond(in)
	if err != nil || len(p99) == 0 {
		return nil, err
	}
	t := &TriggerP99{PreP99Us: float64(pre.P99Us), Seconds: len(p99), WorstUs: -1}
	for _, p := range p99 {
		if p.Value > t.WorstUs {
			t.WorstUs, t.WorstSec = p.Value, p.Sec-trigger
		}
		if p.Value > TriggerP99Factor*t.PreP99Us {
			t.Over++
		}
	}
	return t, nil
}

// triggerCell is the table cell: "34.2 ms at +3.0 s (1.1× pre), 0/30 s >2×".
func triggerCell(t *TriggerP99) string {
	if t == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms at %+.1f s (%.1f× pre), %d/%d s >%.0f×", t.WorstUs/1000, t.WorstSec, t.WorstUs/t.PreP99Us, t.Over, t.Seconds, TriggerP99Factor)
}

// triggerVerdicts check the latency target for each lazy row: no
// second of the window above TriggerP99Factor × its pre-scale p99, and its
// worst second below the remote row's worst second.
func (c Comparison) triggerVerdicts() []string {
	var remote *TriggerP99
	for _, r := range c.Rows {
		if r.Status == StatusOK && r.Protocol == "remote" {
			remote = r.TriggerP99
		}
	}
	var out []string
	for _, r := range c.Rows {
		if r.Status != StatusOK || r.Protocol == "remote" {
			continue
		}
		t := r.TriggerP99
		if t == nil {
			out = append(out, r.Protocol+": not measured (no batch-time histograms in the window, or no pre-scale p99)")
			continue
		}
		var parts []string
		if t.Over == 0 {
			parts = append(parts, fmt.Sprintf("every second ≤ %.0f× pre (met)", TriggerP99Factor))
		} else {
			parts = append(parts, fmt.Sprintf("%d of %d seconds > %.0f× pre (missed)", t.Over, t.Seconds, TriggerP99Factor))
		}
		switch {
		case remote == nil:
			parts = append(parts, "below remote: not measured (no remote run)")
		case t.WorstUs < remote.WorstUs:
			parts = append(parts, fmt.Sprintf("worst second %.1f ms below remote's %.1f ms (met)", t.WorstUs/1000, remote.WorstUs/1000))
		default:
			parts = append(parts, fmt.Sprintf("worst second %.1f ms not below remote's %.1f ms (missed)", t.WorstUs/1000, remote.WorstUs/1000))
		}
		out = append(out, r.Protocol+": "+strings.Join(parts, "; "))
	}
	return out
}
