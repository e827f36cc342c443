package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"koala/dataplane/metrics"
	"koala/experiments"
)

// q1Run is a completed q1 row offered 360 K bids/s: 450 K bids per worker
// CPU-s, producers on time, lag flat.
func q1Run() Steady {
	return Steady{Row: RowQ1One, Phase: PhaseSteady, Query: "nexmark-q1", Operator: "q1-currency", Unit: "bids", Status: experiments.StatusOK,
		Rate: 360_000, ProducedPerSec: 359_000, EventsPerSec: 358_000, CountedAt: "sink", EventsPerCPUSec: 450_000, CPUSeconds: 25, CoresUsed: 0.8,
		Target: TargetQ1PerCore, SustainedTarget: TargetQ1Sustained, SourceTasks: 1, OperatorTasks: 1,
		FetchMinBytes: 64 << 10, FetchMaxWaitMs: 25, TaskWorkers: []string{"w1", "w2"}, ProducerWorkers: []string{"w3"}, Backend: "memory",
		LagRead: true, StartLag: 4000, EndLag: 5000, LagGrowth: 1000, State: StateWindow{DiskOK: true}}
}

func TestSustainedVerdict(t *testing.T) {
	for _, c := range []struct {
		name        string
		change      func(*Steady)
		want, whyIn string
	}{
		{"kept up", func(*Steady) {}, VerdictMet, ""},
		// Growth of a second of the offered rate or more: fell behind.
		{"lag grew", func(s *Steady) { s.LagGrowth, s.EndLag = 400_000, 404_000 }, VerdictMissed, ""},
		{"just under a second", func(s *Steady) { s.LagGrowth = 359_000 }, VerdictMet, ""},
		{"producers short", func(s *Steady) { s.ProducedPerSec = 300_000 }, VerdictUnknown, "producers delivered 300000 bids/s"},
		{"offered less", func(s *Steady) { s.Rate, s.ProducedPerSec = 200_000, 200_000 }, VerdictUnknown, "offered 200000 bids/s, under the target"},
		{"lag not read", func(s *Steady) { s.LagRead = false }, VerdictUnknown, "lag not read"},
		{"failed run", func(s *Steady) { s.Status, s.Reason = experiments.StatusFailed, "boom" }, VerdictUnknown, "boom"},
		{"tuned", func(s *Steady) { s.Tuned = tunedFetch }, VerdictUnknown, "tuned row is never judged"},
	} {
		s := q1Run()
		c.change(&s)
		v, why := s.SustainedVerdict()
		if v != c.want || !strings.Contains(why, c.whyIn) || (c.whyIn == "") != (why == "") {
			t.Errorf("%s: %s (%q), want %s containing %q", c.name, v, why, c.want, c.whyIn)
		}
	}
}

func TestPerCoreVerdict(t *testing.T) {
	s := q1Run()
	if v, why := s.PerCoreVerdict(); v != VerdictMet || why != "" {
		t.Errorf("450 K ≥ 410 K: %s %q", v, why)
	}
	s.EventsPerCPUSec = 400_000
	if v, _ := s.PerCoreVerdict(); v != VerdictMissed {
		t.Errorf("400 K < 410 K: %s", v)
	}
	s.EventsPerCPUSec = 0
	if v, why := s.PerCoreVerdict(); v != VerdictUnknown || !strings.Contains(why, "no worker CPU") {
		t.Errorf("no CPU: %s %q", v, why)
	}
}

// q6Run is a large-state row whose state proves what it must: 2.2 GB on
// disk, 32 MB of value cache, 1 % of lookups answered by it.
func q6Run() Steady {
	return Steady{Row: RowQ6One, Phase: PhaseLargeState, Query: "nexmark_query6_modified", Operator: "statefulMapper", Unit: "closed auctions", Status: experiments.StatusOK,
		Rate: 27_000, ProducedPerSec: 27_000, EventsPerSec: 26_900, CountedAt: "sink", EventsPerCPUSec: 22_000, CoresUsed: 1.2,
		Target: TargetQ6PerCore, SustainedTarget: TargetQ6Sustained, MinStateBytes: TargetQ6StateBytes, SourceTasks: 1, OperatorTasks: 1,
		FetchMinBytes: 64 << 10, FetchMaxWaitMs: 25, TaskWorkers: []string{"w1", "w2"}, ProducerWorkers: []string{"w3"}, Backend: "pebble",
		LagRead: true, LagGrowth: 500,
		State: StateWindow{DiskOK: true, DiskBytes: 2.2e9, CacheOK: true, Lookups: 860_000, Hits: 8_600, LimitBytes: 32 << 20}}
}

func TestStateProof(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*Steady)
		whyIn  string // "" = proven
	}{
		{"proven", func(*Steady) {}, ""},
		{"state too small", func(s *Steady) { s.State.DiskBytes = 1.5e9 }, "1.50 GB of state on disk at the window's start, under the 2.00 GB"},
		{"disk not read", func(s *Steady) { s.State.DiskOK, s.State.DiskErr = false, "no disk reading" }, "state on disk not read"},
		{"cache not read", func(s *Steady) { s.State.CacheOK, s.State.CacheErr = false, "no NATS connection" }, "value-cache counters not read: no NATS connection"},
		{"caches too large", func(s *Steady) { s.State.LimitBytes = 1e9 }, "under 4 × the tasks' value caches"},
		{"reads fit the cache", func(s *Steady) { s.State.Hits = 500_000 }, "answered 58.1 %"},
		{"no lookups", func(s *Steady) { s.State.Lookups, s.State.Hits = 0, 0 }, "no lookups"},
	} {
		s := q6Run()
		c.change(&s)
		ok, why := s.stateProof()
		if ok != (c.whyIn == "") || !strings.Contains(why, c.whyIn) {
			t.Errorf("%s: proven %v (%q), want the reason to contain %q", c.name, ok, why, c.whyIn)
		}
		// Both targets follow the proof: not measured without it.
		pv, _ := s.PerCoreVerdict()
		sv, _ := s.SustainedVerdict()
		if want := VerdictMet; c.whyIn != "" && (pv != VerdictUnknown || sv != VerdictUnknown) || c.whyIn == "" && (pv != want || sv != want) {
			t.Errorf("%s: per-core %s, sustained %s", c.name, pv, sv)
		}
	}
	// Rows without a state requirement need no proof.
	if ok, _ := q1Run().stateProof(); !ok {
		t.Error("a row without MinStateBytes needs a proof")
	}
}

// The targets table reads each row's verdicts from its headline run,
// with its conditions next to the number; a tuned run never counts.
func TestRowTargets(t *testing.T) {
	tunedFast := q1Run()
	tunedFast.Row, tunedFast.Tuned, tunedFast.EventsPerCPUSec = RowHelloTuned, tunedFetchColocate, 2e6
	slowHello := q1Run()
	slowHello.Row, slowHello.Unit, slowHello.Target, slowHello.SustainedTarget, slowHello.EventsPerCPUSec = RowHello, "ev", TargetStatelessPerCore, 0, 300_000
	small := q6Run()
	small.Row, small.State.DiskBytes = RowQ6Two, 1e9
	r := BenchReport{Steady: []Steady{slowHello, tunedFast, q1Run(), q6Run(), small}}
	got := map[string]TargetRow{}
	for _, tr := range r.Targets() {
		got[tr.Target] = tr
	}
	rows := map[string]Row{}
	for _, row := range allRows(Options{}) {
		rows[row.Name] = row
	}
	check := func(target, verdict string, measured ...string) {
		t.Helper()
		tr, ok := got[target]
		if !ok {
			t.Fatalf("no target row %q", target)
		}
		if tr.Verdict != verdict {
			t.Errorf("%s: %s, want %s (%s)", target, tr.Verdict, verdict, tr.Measured)
		}
		for _, m := range measured {
			if !strings.Contains(tr.Measured, m) {
				t.Errorf("%s: measured %q lacks %q", target, tr.Measured, m)
			}
		}
	}
	check(rows[RowHello].PerCoreTarget, VerdictMissed, "300000 ev per worker CPU-s")
	check(rows[RowQ1One].PerCoreTarget, VerdictMet, "450000 bids per worker CPU-s", "accounting: CPU of the worker processes w1, w2 only; producers (on w3)", "placement round robin, 1 source + 1 q1-currency", "fetch 64 KiB / 25 ms", "state: none on disk (memory backend)")
	check(rows[RowQ1One].SustainedTarget, VerdictMet, "offered 360000 bids/s, produced 359000/s", "growth +1000")
	check(rows[RowQ1Two].PerCoreTarget, VerdictUnknown, "not run")
	check(rows[RowQ6One].PerCoreTarget, VerdictMet, "22000 closed auctions per worker CPU-s", "2.20 GB on disk at the window's start", "hit rate 1.0 %")
	check(rows[RowQ6One].SustainedTarget, VerdictMet, "offered 27000 closed auctions/s")
	check(rows[RowQ6Two].PerCoreTarget, VerdictUnknown, "not measured: 1.00 GB of state on disk", "22000 closed auctions per worker CPU-s")
	check(rows[RowCounter10M].PerCoreTarget, VerdictUnknown, "row counter-10m not run")
	for _, tr := range r.Targets() {
		if strings.Contains(tr.Source, RowHelloTuned) || strings.Contains(tr.Source, RowCounterTuned) {
			t.Errorf("a tuned row is a verdict row: %+v", tr)
		}
	}
}

// ComputeSteady reads the lag's growth over the window (least-squares
// slope × length) and the state at its bounds.
func TestComputeSteadyLagAndState(t *testing.T) {
	start := time.Unix(5000, 0)
	var lag, sink []metrics.Point
	for sec := 0; sec < 30; sec++ {
		lag = append(lag, metrics.Point{Sec: float64(sec), Value: 1000 + 500*float64(sec) + float64(sec%2)*300})
		sink = append(sink, metrics.Point{Sec: float64(sec), Value: 1000})
	}
	var states []StateSample
	for sec := 0; sec <= 30; sec++ {
		states = append(states, StateSample{At: start.Add(time.Duration(sec) * time.Second), DiskBytes: 1e9 + 1e6*float64(sec), Tasks: 2, CacheTasks: 2,
			Lookups: uint64(1000 * sec), Hits: uint64(100 * sec), LimitBytes: 64 << 20})
	}
	s := ComputeSteady(Steady{Rate: 1000}, SteadyInputs{Sink: sink, Lag: lag, JobStart: start, From: 5, To: 25, TargetRate: 1000, State: states})
	if !s.LagRead || math.Abs(s.LagGrowth-500*20) > 400 || s.StartLag != 1000+2500+300 {
		t.Errorf("lag: read %v, growth %.0f (want ~10000), start %.0f", s.LagRead, s.LagGrowth, s.StartLag)
	}
	if sus, ok := s.Sustained(); !ok || sus {
		t.Errorf("lag +10000 at 1000 ev/s offered: sustained %v %v, want not", sus, ok)
	}
	st := s.State
	if !st.DiskOK || st.DiskBytes != 1.005e9 || !st.CacheOK || st.Lookups != 20_000 || st.Hits != 2_000 || st.LimitBytes != 64<<20 {
		t.Errorf("state %+v", st)
	}
	if rate, ok := st.HitRate(); !ok || math.Abs(rate-0.1) > 1e-12 {
		t.Errorf("hit rate %v %v", rate, ok)
	}
}
