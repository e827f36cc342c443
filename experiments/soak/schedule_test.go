package soak

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	taskWorkers = []string{"w1", "w2"}
	allWorkers  = []string{"w1", "w2", "w3"}
)

func planFor(t *testing.T, o Options) []Segment {
	t.Helper()
	if o.TaskWorkers == nil {
		o.TaskWorkers, o.Workers = taskWorkers, allWorkers
	}
	segs, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// lines renders a plan as "(segment protocol) +at event" lines.
func lines(segs []Segment) []string {
	var out []string
	for _, s := range segs {
		for _, e := range s.Events {
			out = append(out, fmt.Sprintf("%d %s +%s #%d %s", s.Index, s.Protocol, e.At, e.Seq, e))
		}
	}
	return out
}

// TestPlanSeedGivesEvents pins what a seed gives: a rerun of a failing
// seed must replay the same events at the same times.
func TestPlanSeedGivesEvents(t *testing.T) {
	cases := []struct {
		seed uint64
		dur  time.Duration
		seg  time.Duration
		want []string
	}{
		{7, 3 * time.Minute, 90 * time.Second, []string{
			"0 lazy +21s #1 scale-in window window→1",
			"0 lazy +33.5s #2 task-migration join q3-auctions-0",
			"0 lazy +34.95s #3 kill-controller",
			"0 lazy +46.6s #4 two-operators join q3-join→3,q3-auctions→4",
			"0 lazy +56.75s #5 pause-worker w3 3s",
			"0 lazy +59.2s #6 scale-out window window→4",
			"0 lazy +1m12.2s #7 rebalance join q3-join",
		}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.seed), func(t *testing.T) {
			got := lines(planFor(t, Options{Seed: c.seed, Duration: c.dur, Segment: c.seg}))
			if len(got) < len(c.want) {
				t.Fatalf("%d events, want at least %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			if !reflect.DeepEqual(got[:len(c.want)], c.want) {
				t.Errorf("seed %d gives\n%s\nwant\n%s", c.seed, strings.Join(got[:len(c.want)], "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestPlanDeterministic(t *testing.T) {
	o := Options{Seed: 42, Duration: 15 * time.Minute}
	a, b := planFor(t, o), planFor(t, o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same options gave two plans")
	}
	o.Seed = 43
	if reflect.DeepEqual(lines(a), lines(planFor(t, o))) {
		t.Fatal("seeds 42 and 43 gave the same plan")
	}
}

// TestPlanRotations: segments take the protocols in Rotation's order, and
// every reconfiguration kind and fault kind comes up in a 15-minute soak,
// enough of them for the bar (≥ 40 reconfigurations, ≥ 20
// faults) for any seed.
func TestPlanRotations(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		segs := planFor(t, Options{Seed: seed, Duration: 15 * time.Minute})
		if len(segs) != len(Rotation) {
			t.Fatalf("seed %d: %d segments, want %d", seed, len(segs), len(Rotation))
		}
		for i, s := range segs {
			if s.Protocol != Rotation[i] {
				t.Errorf("seed %d: segment %d runs %s, want %s", seed, i, s.Protocol, Rotation[i])
			}
		}
		c := Count(segs)
		if c.Reconfigs < 40 || c.Faults < 20 {
			t.Errorf("seed %d: %d reconfigurations and %d faults, want ≥ 40 and ≥ 20", seed, c.Reconfigs, c.Faults)
		}
		for _, k := range ReconfigKinds {
			if c.ByReconfig[k] == 0 {
				t.Errorf("seed %d: no %s", seed, k)
			}
		}
		for _, k := range FaultKinds {
			if c.ByFault[k] == 0 {
				t.Errorf("seed %d: no %s", seed, k)
			}
		}
	}
}

// TestPlanRules checks every event of many plans against the rules the
// driver relies on.
func TestPlanRules(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		segs := planFor(t, Options{Seed: seed, Duration: time.Duration(4+seed%12) * time.Minute, Segment: time.Duration(80+seed%100) * time.Second})
		seq := 0
		for _, s := range segs {
			par := map[string]map[string]int{}
			for _, q := range Queries {
				par[q] = map[string]int{}
				for _, op := range Operators(q) {
					par[q][op] = InitialParallelism
				}
			}
			kills := 0
			last := time.Duration(0)
			for _, e := range s.Events {
				seq++
				if e.Seq != seq {
					t.Fatalf("seed %d: event %d numbered %d", seed, seq, e.Seq)
				}
				if e.At < Warmup || e.At > s.Length-Tail || e.At < last {
					t.Errorf("seed %d segment %d: event at %s outside [%s, %s] or before %s", seed, s.Index, e.At, Warmup, s.Length-Tail, last)
				}
				last = e.At
				if (e.Fault == nil) == (e.Reconfig == nil) {
					t.Fatalf("seed %d: event %d is neither or both", seed, e.Seq)
				}
				if f := e.Fault; f != nil {
					switch f.Kind {
					case KillWorker:
						kills++
						if s.Protocol == Remote || kills > 1 || e.At > s.Length-KillTail || f.Worker == "w3" {
							t.Errorf("seed %d segment %d (%s): %s at %s, kill %d", seed, s.Index, s.Protocol, f, e.At, kills)
						}
					case PauseWorker:
						if f.Pause < 2*time.Second || f.Pause > 6*time.Second || f.Worker == "" {
							t.Errorf("seed %d: %s", seed, f)
						}
					}
					continue
				}
				r := e.Reconfig
				want := 1
				if r.Kind == TwoOperators {
					want = 2
				}
				if len(r.Targets) != want {
					t.Fatalf("seed %d: %s has %d targets", seed, r, len(r.Targets))
				}
				for _, tg := range r.Targets {
					cur, ok := par[r.Query][tg.Operator]
					if !ok {
						t.Fatalf("seed %d: %s targets an operator %s does not reconfigure", seed, r, r.Query)
					}
					if tg.Parallelism < MinParallelism || tg.Parallelism > MaxParallelism {
						t.Errorf("seed %d: %s out of bounds", seed, r)
					}
					switch r.Kind {
					case ScaleOut, ScaleIn, TwoOperators:
						if tg.Parallelism == cur {
							t.Errorf("seed %d: %s leaves %s at %d", seed, r, tg.Operator, cur)
						}
						if (r.Kind == ScaleOut && tg.Parallelism < cur) || (r.Kind == ScaleIn && tg.Parallelism > cur) {
							t.Errorf("seed %d: %s from %d goes the other way", seed, r, cur)
						}
					default:
						if tg.Parallelism != cur || r.Task >= cur {
							t.Errorf("seed %d: %s with %s at %d", seed, r, tg.Operator, cur)
						}
					}
					par[r.Query][tg.Operator] = tg.Parallelism
				}
			}
		}
	}
}

func TestPlanBadOptions(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{Duration: 10 * time.Second, TaskWorkers: taskWorkers}, "duration 10s"},
		{Options{Duration: 5 * time.Minute, Segment: 10 * time.Second, TaskWorkers: taskWorkers}, "segment 10s"},
		{Options{Duration: 5 * time.Minute}, "task workers"},
		{Options{Duration: 5 * time.Minute, TaskWorkers: taskWorkers, Protocols: []Protocol{"fast"}}, `protocol "fast": allowed values are lazy, stop-and-restart`},
	}
	for _, c := range cases {
		_, err := Plan(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Plan(%+v) = %v, want an error containing %q", c.o, err, c.want)
		}
	}
}

// TestPlanLastSegment: a remainder too short for a segment joins the last
// one instead of being dropped or run too short.
func TestPlanLastSegment(t *testing.T) {
	segs := planFor(t, Options{Seed: 1, Duration: 4 * time.Minute, Segment: 110 * time.Second})
	var got []string
	for _, s := range segs {
		got = append(got, fmt.Sprintf("%s+%s", s.Start, s.Length))
	}
	if want := []string{"0s+1m50s", "1m50s+2m10s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("segments %v, want %v", got, want)
	}
}
