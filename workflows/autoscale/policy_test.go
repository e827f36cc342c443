package autoscale

import (
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Policy)
		want []string // substrings of the error; none: valid
	}{
		{"defaults", func(*Policy) {}, nil},
		{"utilization 1 is allowed", func(p *Policy) { p.TargetUtilization = 1 }, nil},
		{"utilization 0", func(p *Policy) { p.TargetUtilization = 0 }, []string{"TargetUtilization (--target-utilization): 0 is outside (0, 1]"}},
		{"utilization above 1", func(p *Policy) { p.TargetUtilization = 1.5 }, []string{"TargetUtilization (--target-utilization): 1.5 is outside (0, 1]"}},
		{"utilization negative", func(p *Policy) { p.TargetUtilization = -0.1 }, []string{"--target-utilization"}},
		{"interval 0", func(p *Policy) { p.IntervalSeconds = 0 }, []string{"IntervalSeconds (--interval): 0 must be > 0"}},
		{"window 1 s", func(p *Policy) { p.WindowSeconds = 1 }, []string{"WindowSeconds (--window): 1 must be ≥ 2"}},
		{"catch-up 0", func(p *Policy) { p.CatchUpSeconds = 0 }, []string{"CatchUpSeconds (--catch-up)"}},
		{"negative stabilization", func(p *Policy) { p.StabilizationSeconds = -1 }, []string{"StabilizationSeconds (--stabilization)"}},
		{"negative scale-down delay", func(p *Policy) { p.ScaleDownDelaySeconds = -1 }, []string{"ScaleDownDelaySeconds (--scale-down-delay)"}},
		{"min change 0", func(p *Policy) { p.MinChange = 0 }, []string{"MinChange (--min-change): 0 must be ≥ 1"}},
		{"negative max", func(p *Policy) { p.MaxParallelism = -2 }, []string{"MaxParallelism (--max-parallelism)"}},
		{"reversal drop 1", func(p *Policy) { p.ReversalDrop = 1 }, []string{"ReversalDrop (--reversal-drop): 1 is outside [0, 1)"}},
		{"empty operator", func(p *Policy) { p.Operators = []string{"counter", " "} }, []string{"Operators (--operators): entry 1 is empty"}},
		{"every problem is reported", func(p *Policy) { p.TargetUtilization, p.MinChange = 2, 0 }, []string{"--target-utilization", "--min-change"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			tc.edit(&p)
			err := p.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid policy rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error containing %q, got none", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestPolicyValidateFor(t *testing.T) {
	job := testJob(2)
	for _, tc := range []struct {
		name string
		edit func(*Policy, *JobState)
		want string
	}{
		{"fits", func(*Policy, *JobState) {}, ""},
		{"max equal to NumBuckets", func(p *Policy, _ *JobState) { p.MaxParallelism = 32 }, ""},
		{"job not running", func(_ *Policy, j *JobState) { j.Status, j.Detail = StatusEnded, "workflow Completed" },
			"JobID (--job): job job-1 is not running (workflow Completed)"},
		{"max above NumBuckets", func(p *Policy, _ *JobState) { p.MaxParallelism = 33 },
			"MaxParallelism (--max-parallelism): 33 is above the job's NumBuckets (32)"},
		{"unknown operator", func(p *Policy, _ *JobState) { p.Operators = []string{"countr"} },
			`Operators (--operators): operator "countr" is not in job job-1 (operators: source, counter, sink)`},
		{"source operator", func(p *Policy, _ *JobState) { p.Operators = []string{"source"} },
			`operator "source" is a source`},
		{"other protocol", func(p *Policy, _ *JobState) { p.Protocol = "stop-and-restart" },
			`Protocol (--protocol): "stop-and-restart", but job job-1 reconfigures with "lazy"`},
		{"same protocol", func(p *Policy, _ *JobState) { p.Protocol = "lazy" }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, j := DefaultPolicy(), job
			tc.edit(&p, &j)
			err := p.ValidateFor(j)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("rejected: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWithDefaultsKeepsSetFields(t *testing.T) {
	p := Policy{TargetUtilization: 0.5, MaxParallelism: 8}.WithDefaults()
	if p.TargetUtilization != 0.5 || p.MaxParallelism != 8 || p.IntervalSeconds != DefaultIntervalSeconds || p.MinChange != 1 {
		t.Fatalf("WithDefaults: %+v", p)
	}
	if d := (Policy{}).WithDefaults(); d.MaxParallelism != 0 || len(d.Operators) != 0 {
		t.Fatalf("MaxParallelism and Operators have no default: %+v", d)
	}
}

func TestWindowStartAndNextWindowEnd(t *testing.T) {
	p := Policy{WindowSeconds: 10, StabilizationSeconds: 5, IntervalSeconds: 2}.WithDefaults()
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name       string
		to, change time.Time
		want       time.Time
	}{
		{"no change yet", t0, time.Time{}, t0.Add(-10 * time.Second)},
		{"change long ago", t0, t0.Add(-time.Minute), t0.Add(-10 * time.Second)},
		{"window cut at the stabilization's end", t0, t0.Add(-8 * time.Second), t0.Add(-3 * time.Second)},
		{"a fraction of a second rounds to the next second", t0, t0.Add(-8*time.Second + 300*time.Millisecond), t0.Add(-2 * time.Second)},
	} {
		if got := p.WindowStart(tc.to, tc.change); !got.Equal(tc.want) {
			t.Errorf("%s: WindowStart = %v, want %v", tc.name, got.Unix(), tc.want.Unix())
		}
	}
	if got := p.NextWindowEnd(time.Time{}, time.Time{}); !got.IsZero() {
		t.Errorf("first tick: %v, want zero (now)", got)
	}
	if got := p.NextWindowEnd(t0, time.Time{}); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("next tick: %v, want an interval later", got)
	}
	// After a change that ended at t0+1: stable from t0+6, and a window of
	// MinWindowSeconds (5) needs its end at t0+11.
	if got := p.NextWindowEnd(t0, t0.Add(time.Second)); !got.Equal(t0.Add(11 * time.Second)) {
		t.Errorf("after a change: %v, want t0+11", got.Sub(t0))
	}
}
