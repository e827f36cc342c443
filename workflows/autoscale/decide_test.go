package autoscale

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// sim is a keyed counter fed at rate(second) records per second, whose
// tasks each process perTask records per second; the autoscaler ticks as
// the Autoscale workflow does (Policy.NextWindowEnd), and a decided change
// takes reconfigSecs to complete.
type sim struct {
	pol         Policy
	rate        func(sec int) float64
	perTask     float64
	p           int
	reconfigSec int
	until       int
	// Filled while running, by second.
	processed, lag []float64
	par            []int
}

// run returns every recorded decision (changes and holds) as
// "second: line-without-prefix" and the skip reasons seen.
func (s *sim) run(t *testing.T) (decisions []string, skips []string) {
	t.Helper()
	s.processed, s.lag, s.par = make([]float64, s.until+1), make([]float64, s.until+2), make([]int, s.until+1)
	var g Guards
	var prevEnd time.Time
	p := s.p
	changeAt := -1 // second at which a decided change completes
	var pending Change
	var pendingDecision Decision
	next := 10 // first tick: the window ending at second 10
	for sec := 0; sec <= s.until; sec++ {
		if sec == changeAt {
			pending.Outcome, pending.Ended = OutcomeDone, t0.Add(time.Duration(sec)*time.Second)
			g = g.Applied(pendingDecision, pending)
			p = pending.To
			changeAt = -1
			next = int(s.pol.NextWindowEnd(prevEnd, g.LastChange).Sub(t0) / time.Second)
		}
		// Second sec: records arrive, up to p×perTask of them (and of the
		// backlog) are processed.
		cap := float64(p) * s.perTask
		s.processed[sec] = min(s.rate(sec)+s.lag[sec], cap)
		s.lag[sec+1] = s.lag[sec] + s.rate(sec) - s.processed[sec]
		s.par[sec] = p
		if sec+1 != next || changeAt >= 0 {
			continue
		}
		// A tick at the end of second sec: the window [from, sec+1).
		to := t0.Add(time.Duration(sec+1) * time.Second)
		from := s.pol.WindowStart(to, g.LastChange)
		obs := s.observe(from, to)
		job := testJob(p)
		d, ng := Decide(s.pol, job, obs, g)
		g = ng
		prevEnd = to
		next = int(s.pol.NextWindowEnd(prevEnd, g.LastChange).Sub(t0) / time.Second)
		if d.Skip != "" {
			skips = append(skips, d.Skip)
			continue
		}
		if d.Recorded() {
			line := d.Line()
			line = line[strings.Index(line, " ")+1:] // drop "#seq"
			line = line[strings.Index(line, " ")+1:] // drop the clock
			decisions = append(decisions, fmt.Sprintf("%d: %s", sec+1, line))
		}
		if d.Acted() {
			if len(d.Changes) != 1 {
				t.Fatalf("second %d: %d changes for one scaled operator", sec+1, len(d.Changes))
			}
			pending, pendingDecision = d.Changes[0], d
			changeAt = sec + 1 + s.reconfigSec
		}
	}
	return decisions, skips
}

// observe aggregates the simulated seconds [from, to) the way Aggregate
// does rows.
func (s *sim) observe(from, to time.Time) Observation {
	a, b := int(from.Sub(t0)/time.Second), int(to.Sub(t0)/time.Second)
	var in, busy float64
	for sec := a; sec < b; sec++ {
		in += s.processed[sec]
		busy += s.processed[sec] / s.perTask
	}
	n := float64(b - a)
	return Observation{From: from, To: to, Operators: []OperatorLoad{
		{Operator: "counter", Tasks: s.par[b-1], RecordsIn: in / n, RecordsOut: in / n, Busy: busy / n},
		{Operator: "sink", Tasks: 1, RecordsIn: in / n, Busy: in / n / 1e6},
		{Operator: "source", Tasks: 1, RecordsIn: in / n, RecordsOut: in / n, Busy: in / n / 1e6, LagStart: s.lag[a], LagEnd: s.lag[b-1]},
	}}
}

func step(rates map[int]float64) func(int) float64 {
	return func(sec int) float64 {
		best, v := -1, 0.0
		for from, r := range rates {
			if from <= sec && from > best {
				best, v = from, r
			}
		}
		return v
	}
}

var simPolicy = Policy{IntervalSeconds: 5, WindowSeconds: 10, TargetUtilization: 0.7, CatchUpSeconds: 30,
	StabilizationSeconds: 5, ScaleDownDelaySeconds: 20, ReversalDrop: 0.2, MinChange: 1}.WithDefaults()

// The Done-when shape: the input doubles, then halves, then stays. One
// scale-out at the step, holds during the scale-down delay, one scale-in,
// then nothing.
func TestDecideStepUpStepDownConstant(t *testing.T) {
	s := &sim{pol: simPolicy, rate: step(map[int]float64{0: 7000, 30: 14000, 90: 7000}), perTask: 7000, p: 2, reconfigSec: 2, until: 160}
	got, _ := s.run(t)
	want := []string{
		"35: counter 2→3: true rate 7 K/s/task, input 10.5 K/s",
		"97: counter 3→2 held: scale-down delay: DS2 has asked for 2 or fewer for 0s of 20s",
		"102: counter 3→2 held: scale-down delay: DS2 has asked for 2 or fewer for 5s of 20s",
		"107: counter 3→2 held: scale-down delay: DS2 has asked for 2 or fewer for 10s of 20s",
		"112: counter 3→2 held: scale-down delay: DS2 has asked for 2 or fewer for 15s of 20s",
		"117: counter 3→2: true rate 7 K/s/task, input 7 K/s",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("decisions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An overloaded operator: its backlog makes DS2 ask for more than the
// input alone would, so that the lag drains within CatchUpSeconds.
func TestDecideCountsTheLag(t *testing.T) {
	to := t0.Add(60 * time.Second)
	// The source reads 7000/s while its lag grows 10000 → 30000 over 10 s:
	// 9000/s arrive (1.84 tasks of 4900/s), plus 30000/30 s to catch up
	// (2.04 tasks).
	obs := Observation{From: to.Add(-10 * time.Second), To: to, Operators: []OperatorLoad{source(7000, 10000, 30000), op("counter", 1, 7000, 7000, 1)}}
	d, _ := Decide(simPolicy, testJob(1), obs, Guards{})
	if len(d.Changes) != 1 || d.Changes[0].To != 3 {
		t.Fatalf("changes %v: want counter 1→3", d.Changes)
	}
	if e, _ := d.Estimate("source"); e.Arrival != 9000 || e.Lag != 30000 {
		t.Fatalf("source estimate %+v: want arrival 9000, lag 30000", e)
	}
	slow := simPolicy
	slow.CatchUpSeconds = 1e6 // no hurry to catch up
	if d, _ := Decide(slow, testJob(1), obs, Guards{}); len(d.Changes) != 1 || d.Changes[0].To != 2 {
		t.Fatalf("changes %v: want counter 1→2 on the arrival rate alone", d.Changes)
	}
}

// A scale-out at 10100/s (9.9 K/s over its window), then a lasting dip to 9700/s (DS2: 2 tasks):
// the scale-in is held for as long as the input is not 20 % below the
// rate that made it scale out; a real drop lets it through.
func TestDecideNoOscillation(t *testing.T) {
	s := &sim{pol: simPolicy, rate: step(map[int]float64{0: 9700, 20: 10100, 60: 9700, 150: 7500}), perTask: 7000, p: 2, reconfigSec: 2, until: 220}
	got, _ := s.run(t)
	var changes []string
	oscillation := 0
	for _, line := range got {
		if !strings.Contains(line, "held") {
			changes = append(changes, line)
		}
		if strings.Contains(line, "no oscillation: input 9.7 K/s is not 20% below the 9.9 K/s it was scaled out at") {
			oscillation++
		}
	}
	if len(changes) != 2 || !strings.Contains(changes[0], "counter 2→3") || !strings.Contains(changes[1], "counter 3→2") || oscillation == 0 {
		t.Fatalf("want 2→3, reversals held for no oscillation, then 3→2 after the drop to 7500/s; got:\n%s", strings.Join(got, "\n"))
	}
	if at := changes[1][:strings.Index(changes[1], ":")]; at <= "150" || len(at) != 3 {
		t.Fatalf("scale-in at second %s: want it only after the drop at 150", at)
	}
	// Without the guards a rate that flips around the boundary flips the
	// operator with it.
	flip := map[int]float64{}
	for sec := 0; sec < 300; sec += 10 {
		flip[sec] = 9500
		if sec%20 == 10 {
			flip[sec] = 10100
		}
	}
	s = &sim{pol: simPolicy, rate: step(flip), perTask: 7000, p: 2, reconfigSec: 2, until: 290}
	s.pol.ReversalDrop, s.pol.ScaleDownDelaySeconds = 0, 0
	got, _ = s.run(t)
	if len(got) < 4 {
		t.Fatalf("without the guards the operator should flip between 2 and 3, got:\n%s", strings.Join(got, "\n"))
	}
}

func TestDecideSkips(t *testing.T) {
	to := t0.Add(60 * time.Second)
	obs := Observation{From: to.Add(-10 * time.Second), To: to, Operators: []OperatorLoad{source(20000, 0, 0), op("counter", 2, 14000, 7000, 1)}}
	for _, tc := range []struct {
		name string
		job  func(*JobState)
		obs  func(*Observation)
		g    Guards
		want string
	}{
		{name: "deploying", job: func(j *JobState) { j.Status = StatusDeploying }, want: "job deploying"},
		{name: "ended", job: func(j *JobState) { j.Status, j.Detail = StatusEnded, "input ended" }, want: "job ended: input ended"},
		{name: "a reconfiguration runs", job: func(j *JobState) { j.Reconfiguring = []Running{{"counter", "job-1-reconfig-3"}} },
			want: "reconfiguration job-1-reconfig-3 of counter is running"},
		{name: "window reaches into the stabilization after our change", g: Guards{LastChange: to.Add(-12 * time.Second)},
			want: "stabilizing: the window from "},
		{name: "window reaches into the stabilization after someone else's change", job: func(j *JobState) { j.LastReconfigEnd = to.Add(-8 * time.Second) },
			want: "stabilizing"},
		{name: "short window", obs: func(o *Observation) { o.From = o.To.Add(-4 * time.Second) }, want: "window of 4s is shorter than 5s"},
		{name: "no rows", obs: func(o *Observation) { o.Operators = nil }, want: "no metric rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, o := testJob(2), obs
			if tc.job != nil {
				tc.job(&job)
			}
			if tc.obs != nil {
				tc.obs(&o)
			}
			d, _ := Decide(simPolicy, job, o, tc.g)
			if !strings.Contains(d.Skip, tc.want) || d.Recorded() || len(d.Estimates) != 0 {
				t.Fatalf("skip %q (changes %v), want one containing %q", d.Skip, d.Changes, tc.want)
			}
		})
	}
	// Without a skip the same observation scales the counter out.
	d, _ := Decide(simPolicy, testJob(2), obs, Guards{})
	if d.Skip != "" || len(d.Changes) != 1 || d.Changes[0].To != 5 {
		t.Fatalf("decision %+v: want counter 2→5", d)
	}
}

func TestDecideActsOnlyOnScaledOperators(t *testing.T) {
	to := t0.Add(60 * time.Second)
	// The source would need 2 tasks and the sink 3: neither is scaled by
	// default; listing the sink makes it scaled.
	obs := Observation{From: to.Add(-10 * time.Second), To: to, Operators: []OperatorLoad{
		{Operator: "source", Tasks: 1, RecordsIn: 7000, RecordsOut: 7000, Busy: 0.9},
		op("counter", 2, 7000, 7000, 1),
		op("sink", 1, 7000, 4000, 1),
	}}
	d, _ := Decide(simPolicy, testJob(2), obs, Guards{})
	if d.Recorded() {
		t.Fatalf("decided %v / held %v for operators it does not scale", d.Changes, d.Holds)
	}
	if e, _ := d.Estimate("sink"); e.Target != 3 {
		t.Fatalf("sink estimate %+v: the target is still computed and shown", e)
	}
	pol := simPolicy
	pol.Operators = []string{"sink"}
	d, _ = Decide(pol, testJob(2), obs, Guards{})
	if len(d.Changes) != 1 || d.Changes[0].Operator != "sink" || d.Changes[0].To != 3 {
		t.Fatalf("changes %v: want sink 1→3 only", d.Changes)
	}
}

func TestDecideMinChange(t *testing.T) {
	to := t0.Add(60 * time.Second)
	obs := Observation{From: to.Add(-10 * time.Second), To: to, Operators: []OperatorLoad{source(14000, 0, 0), op("counter", 2, 14000, 7000, 1)}}
	pol := simPolicy
	pol.MinChange = 2
	d, _ := Decide(pol, testJob(2), obs, Guards{})
	if len(d.Changes) != 0 || len(d.Holds) != 1 || !strings.Contains(d.Holds[0].Reason, "a change of 1 is below MinChange 2") {
		t.Fatalf("changes %v holds %v: want 2→3 held by MinChange", d.Changes, d.Holds)
	}
}

func TestGuardsApplied(t *testing.T) {
	d := Decision{At: t0, Estimates: []Estimate{{Operator: "counter", Input: 12000}}}
	c := Change{Operator: "counter", From: 2, To: 4, Outcome: OutcomeRejected, Ended: t0.Add(3 * time.Second)}
	var g Guards
	if got := g.Applied(d, c); !got.LastChange.IsZero() || len(got.Ops) != 0 {
		t.Fatalf("a rejected change moved the guards: %+v", got)
	}
	c.Outcome = OutcomeDone
	got := g.Applied(d, c)
	if !got.LastChange.Equal(c.Ended) || got.op("counter").ScaledOutInput != 12000 {
		t.Fatalf("after a scale-out: %+v", got)
	}
	if len(g.Ops) != 0 {
		t.Fatal("Applied changed its receiver's memory")
	}
	in := got.Applied(d, Change{Operator: "counter", From: 4, To: 2, Outcome: OutcomeDone, Ended: t0.Add(time.Minute)})
	if in.op("counter").ScaledOutInput != 0 || !in.LastChange.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after a scale-in the reversal guard is spent: %+v", in)
	}
}

// Someone else scaled the operator in while DS2 asked for fewer tasks:
// the scale-down delay starts again from the new parallelism.
func TestDecideRestartsDelayAfterExternalRescale(t *testing.T) {
	pol := simPolicy
	at := func(s int) Observation {
		to := t0.Add(time.Duration(s) * time.Second)
		return Observation{From: to.Add(-10 * time.Second), To: to, Operators: []OperatorLoad{source(2000, 0, 0), op("counter", 4, 2000, 7000, 1)}}
	}
	_, g := Decide(pol, testJob(4), at(100), Guards{})
	if og := g.op("counter"); !og.BelowSince.Equal(t0.Add(100*time.Second)) || og.BelowMax != 1 {
		t.Fatalf("guard %+v", og)
	}
	_, g = Decide(pol, testJob(1), at(110), g) // now at 1: DS2's 1 is no scale-in
	if og := g.op("counter"); !og.BelowSince.IsZero() {
		t.Fatalf("guard %+v: the delay should be reset", og)
	}
}

func TestDecisionRows(t *testing.T) {
	to := t0.Add(60 * time.Second)
	obs := Observation{From: to.Add(-10 * time.Second), To: to, Operators: []OperatorLoad{source(19600, 0, 0), op("counter", 2, 14000, 7000, 1)}}
	d, _ := Decide(simPolicy, testJob(2), obs, Guards{})
	d.Seq = 7
	d.Changes[0].Outcome = OutcomeDone
	rows := d.Rows("job-1", "job-1-autoscaler")
	if len(rows) != 3 {
		t.Fatalf("%d rows, want one per operator", len(rows))
	}
	c := rows[1]
	if c.Operator != "counter" || c.Action != ActionScaleOut || c.From != 2 || c.To != 4 || c.Target != 4 || c.Seq != 7 ||
		c.Outcome != OutcomeDone || c.TrueRate != 7000 || !near(c.InputRate, 19600) || !c.Time.Equal(to) || !c.WindowFrom.Equal(obs.From) {
		t.Fatalf("counter row %+v", c)
	}
	if s := rows[0]; s.Operator != "source" || s.Action != ActionNone || s.Arrival != 19600 {
		t.Fatalf("source row %+v", s)
	}
	if sink := rows[2]; sink.Detail != "no data: never busy in the window" {
		t.Fatalf("sink row %+v", sink)
	}
}
