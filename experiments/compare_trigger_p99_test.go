package experiments

import (
	"strings"
	"testing"
	"time"

	"koala/dataplane/metrics"
	"koala/experiments/internal/fixture"
)

// TestTriggerP99: per second the tasks' histograms are merged before the
// p99 is taken; only seconds overlapping [trigger, trigger + 30 s) count,
// and each is checked against 2 × the pooled pre-scale p99.
func TestTriggerP99(t *testing.T) {
	s := srSeries() // trigger 30.5, input to 60
	s.BatchHists = []metrics.BatchHistSample{
		{Task: "counter-0", Sec: 10, Hist: fixture.BatchHist(t, 100, time.Millisecond)},  // pre: p99 1 ms
		{Task: "counter-0", Sec: 30, Hist: fixture.BatchHist(t, 5, 20*time.Millisecond)}, // overlaps the trigger
		{Task: "counter-0", Sec: 45, Hist: fixture.BatchHist(t, 10, 1500*time.Microsecond)},
		// Second 50: one task at 3 ms, the other at 1 ms; merged, the
		// second's p99 is 3 ms, above 2 × 1 ms.
		{Task: "counter-0", Sec: 50, Hist: fixture.BatchHist(t, 50, 3*time.Millisecond)},
		{Task: "counter-1", Sec: 50, Hist: fixture.BatchHist(t, 50, time.Millisecond)},
		{Task: "counter-1", Sec: 61, Hist: fixture.BatchHist(t, 1, 900*time.Millisecond)}, // past +30 s
	}
	m := ComputeRunMetrics(s)
	tp := m.TriggerP99
	if tp == nil {
		t.Fatalf("no trigger p99 (error %q)", m.BatchHDRError)
	}
	near := func(got, want float64) bool { return got >= want*0.999 && got <= want*1.001 }
	if !near(tp.WorstUs, 20_000) || tp.WorstSec != -0.5 || tp.Seconds != 3 || tp.Over != 2 || !near(tp.PreP99Us, 1000) {
		t.Fatalf("trigger p99 %+v, want worst 20 ms at -0.5 s, 3 seconds, 2 over 2×, pre 1 ms", *tp)
	}
	if c := triggerCell(tp); c != "20.0 ms at -0.5 s (20.0× pre), 2/3 s >2×" {
		t.Errorf("cell %q", c)
	}

	s.BatchHists = s.BatchHists[:1] // nothing after the trigger
	if m := ComputeRunMetrics(s); m.TriggerP99 != nil {
		t.Errorf("no batch after the trigger: %+v", *m.TriggerP99)
	}
	s.BatchHists = nil
	if m := ComputeRunMetrics(s); m.TriggerP99 != nil {
		t.Errorf("no histograms: %+v", *m.TriggerP99)
	}
}

func TestTriggerVerdicts(t *testing.T) {
	row := func(proto string, tp *TriggerP99) CompareRow {
		r := CompareRow{Protocol: proto, Status: StatusOK}
		r.TriggerP99 = tp
		return r
	}
	lazyOK := &TriggerP99{WorstUs: 1500, PreP99Us: 1000, Seconds: 30}
	lazySpiky := &TriggerP99{WorstUs: 12000, PreP99Us: 1000, Seconds: 30, Over: 4}
	remote := &TriggerP99{WorstUs: 10000, PreP99Us: 9000, Seconds: 30}
	for _, tc := range []struct {
		name string
		rows []CompareRow
		want []string
	}{
		{"met", []CompareRow{row("lazy", lazyOK), row("remote", remote)},
			[]string{"lazy: every second ≤ 2× pre (met); worst second 1.5 ms below remote's 10.0 ms (met)"}},
		{"missed", []CompareRow{row("lazy", lazySpiky), row("remote", remote)},
			[]string{"lazy: 4 of 30 seconds > 2× pre (missed); worst second 12.0 ms not below remote's 10.0 ms (missed)"}},
		{"no remote run", []CompareRow{row("lazy", lazyOK), {Protocol: "remote", Status: StatusFailed}},
			[]string{"lazy: every second ≤ 2× pre (met); below remote: not measured (no remote run)"}},
		{"not measured", []CompareRow{row("lazy", nil)},
			[]string{"lazy: not measured (no batch-time histograms in the window, or no pre-scale p99)"}},
	} {
		got := Comparison{Rows: tc.rows}.triggerVerdicts()
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

// TestTargetInFigures: the throughput figures counted at the operator's
// input use the sink's windows: pre-scale after the warm-up, the minimum
// from the reconfiguration's start to its end + ResumeSlackSec.
func TestTargetInFigures(t *testing.T) {
	s := srSeries() // reconfiguration [30.5, 33.0], input to 60
	in := make([]float64, 60)
	for i := range in {
		in[i] = 1000
	}
	in[1] = 10   // warm-up, ignored
	in[20] = 500 // the pre-scale noise floor
	in[34] = 800 // the lowest second of the window (to 35)
	in[36] = 100 // past the window
	s.TargetIn = pts(0, in...)
	f := ComputeRunMetrics(s).TargetIn
	if f == nil || f.Min == nil || f.MinRatio == nil {
		t.Fatalf("figures %+v", f)
	}
	wantPre := (1000*26.0 + 500) / 27 // seconds 3..29
	if d := f.Pre - wantPre; d > 1e-9 || d < -1e-9 || f.PreMin != 500 || *f.Min != 800 {
		t.Fatalf("pre %.2f (want %.2f), pre min %.0f, min %.0f", f.Pre, wantPre, f.PreMin, *f.Min)
	}
	if c := targetInCell(f); c != "0.82 (pre min 0.51)" {
		t.Errorf("cell %q", c)
	}
	s.TargetIn = nil
	if f := ComputeRunMetrics(s).TargetIn; f != nil || targetInCell(f) != "n/a" {
		t.Errorf("no input series: %+v", f)
	}
}
