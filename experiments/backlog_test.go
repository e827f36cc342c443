package experiments

import (
	"math"
	"strings"
	"testing"

	"koala/dataplane/metrics"
)

func TestBacklogFigures(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	inf := math.Inf(1)
	for _, c := range []struct {
		name             string
		lag              []metrics.Point
		start, horizon   float64
		drain            float64
		grow, drained    *float64
		atTrigger, atEnd *float64
		note             string
	}{
		// Overloaded before the trigger at 4 s, peaks at 7 s, back under
		// 1000 at 10 s and stays: stops growing +3 s, drained +6 s.
		{"grows, peaks, drains", series(500, 2000, 4000, 6000, 8000, 9000, 9500, 9800, 6000, 2000, 900, 700, 800, 600, 700), 4, 15, 1000,
			f(3), f(6), f(8000), f(700), ""},
		// A dip under the threshold before the peak is not the drain.
		{"dip before the peak", series(500, 500, 500, 900, 800, 3000, 6000, 7000, 4000, 800, 700, 600, 500), 2, inf, 1000,
			f(5), f(7), f(500), f(500), ""},
		{"still growing at the end", series(500, 2000, 4000, 6000, 8000, 10000, 12000, 14000), 3, 8, 1000,
			nil, nil, f(6000), f(14000), BacklogStillGrowing},
		{"peaks but never drains", series(500, 2000, 4000, 9000, 8000, 7000, 6500, 6000, 5800, 5600, 5500), 2, 11, 1000,
			f(1), nil, f(4000), f(5500), BacklogNeverDrained},
		{"no backlog", series(100, 200, 300, 250, 200, 100), 2, inf, 1000,
			f(0), f(0), f(300), f(100), BacklogNone},
		{"no data after the trigger", series(100, 200), 5, inf, 1000, nil, nil, nil, nil, BacklogNoData},
	} {
		b := BacklogFigures(c.lag, c.start, c.horizon, c.drain)
		same := func(a, b *float64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
		if !same(b.StopsGrowingSec, c.grow) || !same(b.DrainedSec, c.drained) || !same(b.AtTrigger, c.atTrigger) || !same(b.LeftAtEnd, c.atEnd) || b.Note != c.note {
			t.Errorf("%s: grow %v drained %v at trigger %v left %v note %q; want %v %v %v %v %q", c.name,
				fp(b.StopsGrowingSec), fp(b.DrainedSec), fp(b.AtTrigger), fp(b.LeftAtEnd), b.Note, fp(c.grow), fp(c.drained), fp(c.atTrigger), fp(c.atEnd), c.note)
		}
	}
}

// Without a probe the drain threshold comes from the run's smallest
// pre-scale second, not its mean (an overloaded run's mean grows with the
// backlog).
func TestComputeRunMetricsBacklog(t *testing.T) {
	// Kept up before the trigger at 8 s (smallest second 400, mean 680),
	// then a backlog that peaks at 10 s and comes down through 1500.
	lag := series(0, 0, 0, 400, 900, 600, 700, 800, 3000, 6000, 9000, 5000, 1500, 1200, 1100, 1000, 900)
	sink := series(1, 1, 1, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10)
	m := ComputeRunMetrics(RunSeries{Sink: sink, Lag: lag, Reconfigs: []Interval{{Start: 8, End: 9}}, InputEnd: 17})
	if m.Backlog == nil || m.Backlog.DrainLag != LagThreshold(400) {
		t.Fatalf("backlog %+v, want drain lag %v", m.Backlog, LagThreshold(400))
	}
	// Under 1400 from 13 s; by the mean's threshold (1680) it would be 12 s.
	if m.Backlog.StopsGrowingSec == nil || *m.Backlog.StopsGrowingSec != 2 || m.Backlog.DrainedSec == nil || *m.Backlog.DrainedSec != 5 {
		t.Errorf("backlog %+v: want stops growing +2 s, drained +5 s", *m.Backlog)
	}
	m = ComputeRunMetrics(RunSeries{Sink: sink, Lag: lag, Reconfigs: []Interval{{Start: 8, End: 9}}, InputEnd: 17, DrainLag: 1600})
	if m.Backlog.DrainLag != 1600 || m.Backlog.DrainedSec == nil || *m.Backlog.DrainedSec != 4 {
		t.Errorf("probe's drain lag 1600: backlog %+v, want drained +4 s", *m.Backlog)
	}
	c := Comparison{Experiment: "x", Load: &OfferedLoad{Rate: 13_000, Share: 1.3, Sustainable: 10_000, Limit: "lag grew at 11500 ev/s", ProbeWorkflow: "p", DrainLag: 1600, StateBytes: 400e6},
		Rows: []CompareRow{{Protocol: "lazy", Status: StatusOK, RunMetrics: m}}}
	var b strings.Builder
	if err := c.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"offered 13000 ev/s = 1.30 × the 10000 ev/s", "400.0 MB of warm-up state", "+2 s", "+4 s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if md := c.Markdown(); !strings.Contains(md, "## Backlog") || !strings.Contains(md, "| lazy | n/a | 3000 | ") {
		t.Errorf("markdown lacks the backlog table:\n%s", md)
	}
}

// A run overloaded from its start, with no probe, has no second that
// shows the lag of a pipeline keeping up: its smallest pre-scale second
// already held a backlog, and a threshold from it would call a drain at
// a lag far above what the pipeline keeps. borg at a fixed 120 770 ev/s
// (2026-12-07) had 169 K of lag at its first counted second and was
// reported drained at a lag of 202 K.
func TestComputeRunMetricsBacklogNoThreshold(t *testing.T) {
	lag := series(0, 28858, 111484, 168846, 196442, 235033, 280934, 301312, 329323, 342473, 388720,
		814292, 864297, 779678, 697951, 603808, 400000, 200000, 150000, 100000, 1208, 1300)
	sink := series(1, 1, 1, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10)
	m := ComputeRunMetrics(RunSeries{Sink: sink, Lag: lag, Reconfigs: []Interval{{Start: 11, End: 12}}, InputEnd: 22})
	bl := m.Backlog
	if bl == nil || bl.DrainLag != 0 || bl.DrainedSec != nil || bl.Note != BacklogNoThreshold {
		t.Fatalf("backlog %+v: want no drain threshold and no drain", bl)
	}
	if bl.StopsGrowingSec == nil || *bl.StopsGrowingSec != 1 || bl.LeftAtEnd == nil || *bl.LeftAtEnd != 1300 {
		t.Errorf("backlog %+v: want stops growing +1 s, 1300 left", *bl)
	}
	c := Comparison{Experiment: "x", Rows: []CompareRow{{Protocol: "lazy", Status: StatusOK, RunMetrics: m}}}
	md := c.Markdown()
	if !strings.Contains(md, "| lazy | n/a | 814292 | 864297 | +1 s | no threshold | 1300 | n/a |") {
		t.Errorf("markdown lacks the row without a threshold:\n%s", md)
	}
	// A probe's threshold still applies to such a run.
	m = ComputeRunMetrics(RunSeries{Sink: sink, Lag: lag, Reconfigs: []Interval{{Start: 11, End: 12}}, InputEnd: 22, DrainLag: 17959})
	if m.Backlog.DrainedSec == nil || *m.Backlog.DrainedSec != 9 {
		t.Errorf("probe's drain lag: backlog %+v, want drained +9 s", *m.Backlog)
	}
}

func TestSlope(t *testing.T) {
	if s, ok := Slope([]float64{0, 1, 2, 3}, []float64{1, 3, 5, 7}); !ok || math.Abs(s-2) > 1e-12 {
		t.Errorf("slope of y=2x+1 = %v %v, want 2", s, ok)
	}
	if s, ok := Slope([]float64{0, 1, 2, 3}, []float64{5, 5, 5, 5}); !ok || s != 0 {
		t.Errorf("flat slope = %v %v", s, ok)
	}
	if _, ok := Slope([]float64{1, 1}, []float64{1, 2}); ok {
		t.Error("slope over one x: ok")
	}
	if _, ok := Slope([]float64{1}, []float64{1}); ok {
		t.Error("slope of one point: ok")
	}
}
