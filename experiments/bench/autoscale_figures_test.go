package bench

import (
	"slices"
	"strings"
	"testing"

	"koala/dataplane/metrics"
)

// per builds a series from second 0.
func per(vals ...float64) []metrics.Point {
	out := make([]metrics.Point, len(vals))
	for i, v := range vals {
		out[i] = metrics.Point{Sec: float64(i), Value: v}
	}
	return out
}

func TestAutoscaleEpisode(t *testing.T) {
	in := EpisodeInput{PreRate: 100, PostRate: 200, NominalStep: 5, BaselineFrom: 1, Window: 6}
	for _, tc := range []struct {
		name             string
		reads, lag, sink []metrics.Point
		in               EpisodeInput
		reason           string // a substring; "" for figures
		step, recovered  float64
		ok               bool
		minPre           float64
		gaps             int
	}{
		{
			// Step seen at 6 (a second after the nominal 5); the lag of
			// 20 records (0.2 s) rises to 800 (4 s) and is back at 40
			// records = 0.2 s of the doubled input at 10: 4 s after it.
			// Only the lag in seconds calls 40 records "back".
			name:  "lazy-like: back in seconds of input, no dip",
			reads: per(100, 100, 100, 100, 100, 100, 200, 150, 150, 300, 250, 200, 200),
			lag:   per(20, 20, 20, 20, 20, 20, 300, 800, 600, 200, 40, 40, 40),
			sink:  per(100, 100, 100, 100, 100, 100, 120, 150, 150, 300, 250, 200, 200),
			in:    in, step: 6, recovered: 4, ok: true, minPre: 1.2,
		},
		{
			name:  "stop-and-restart-like: the sink's silent seconds count as 0",
			reads: per(100, 100, 100, 100, 100, 100, 200, 0, 0, 400, 200, 200, 200),
			lag:   per(20, 20, 20, 20, 20, 20, 300, 500, 700, 300, 40, 40, 40),
			sink:  without(per(100, 100, 100, 100, 100, 100, 150, 0, 0, 400, 200, 200, 200), 7, 8),
			in:    in, step: 6, recovered: 4, ok: true, minPre: 0, gaps: 2,
		},
		{
			name:  "never back within the window",
			reads: per(100, 100, 100, 100, 100, 100, 200, 150, 150, 150, 150, 150, 150),
			lag:   per(20, 20, 20, 20, 20, 20, 300, 800, 1200, 1500, 1800, 2100, 2400),
			sink:  per(100, 100, 100, 100, 100, 100, 150, 150, 150, 150, 150, 150, 150),
			in:    in, step: 6, ok: false, minPre: 1.5,
		},
		{name: "no step in the reads", reads: per(100, 100, 100, 100, 100, 100, 110, 120, 100, 100, 100, 100), lag: per(1), sink: per(1), in: in, reason: "never rose"},
		{name: "no reads before the step", reads: per(0, 0, 0, 0, 0, 200, 200), in: in, reason: "no source reads"},
		{name: "data ends right after the step", reads: per(100, 100, 100, 100, 100, 100, 200, 200), lag: per(1), sink: per(1), in: in, reason: "data ends"},
		{name: "no lag rows", reads: per(100, 100, 100, 100, 100, 100, 200, 200, 200, 200, 200, 200), sink: per(1), in: in, reason: "no Kafka lag"},
		{name: "bad input", in: EpisodeInput{}, reason: "bad episode input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, reason := autoscaleEpisode(tc.reads, tc.lag, tc.sink, tc.in)
			if tc.reason != "" {
				if !strings.Contains(reason, tc.reason) {
					t.Fatalf("reason %q, want one with %q (figures %+v)", reason, tc.reason, f)
				}
				return
			}
			if reason != "" {
				t.Fatalf("not measured: %s", reason)
			}
			if f.StepSec != tc.step || f.Seconds.Recovered != tc.ok || (tc.ok && f.Seconds.RecoveredSec != tc.recovered) {
				t.Fatalf("step %v, recovered %v after %v s; want step %v, recovered %v after %v s (%+v)", f.StepSec, f.Seconds.Recovered, f.Seconds.RecoveredSec, tc.step, tc.ok, tc.recovered, f.Seconds)
			}
			if got := f.Seconds.MinOverPre(); got != tc.minPre || f.SinkGaps != tc.gaps {
				t.Fatalf("min/pre %v with %d sink gaps, want %v with %d", got, f.SinkGaps, tc.minPre, tc.gaps)
			}
			if f.Seconds.BaselineLag != 0.2 || f.Records.BaselineLag != 20 {
				t.Fatalf("baselines %v s and %v records, want 0.2 s and 20", f.Seconds.BaselineLag, f.Records.BaselineLag)
			}
		})
	}
}

// without drops the points at the given seconds.
func without(s []metrics.Point, secs ...float64) []metrics.Point {
	var out []metrics.Point
	for _, p := range s {
		if !slices.Contains(secs, p.Sec) {
			out = append(out, p)
		}
	}
	return out
}
