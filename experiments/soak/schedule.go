// Package soak is `koala soak`: a chaos soak on the local stack. Three
// jobs (a keyed counter, a windowed aggregate and a two-input join) run with
// checkpoints while, at seeded random moments, reconfigurations and faults
// are started; at the end an oracle recomputes every output from the input
// topics and counts what was lost, duplicated and reordered.
//
// The schedule (this file) is pure: a seed and the options give the same
// list of events every time, so a failing seed reproduces its run.
package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Protocol is the reconfiguration protocol of one segment: a job's
// protocol is fixed when it starts, so the soak rotates protocols by
// running its jobs in consecutive segments.
type Protocol string

const (
	LazyEventual      Protocol = "lazy"
	LazyFetchOnDemand Protocol = "lazy-fetch-on-demand"
	StopAndRestart    Protocol = "stop-and-restart"
	Remote            Protocol = "remote"
	DRRS              Protocol = "drrs"
)

// Rotation is the order in which segments take protocols.
var Rotation = []Protocol{LazyEventual, StopAndRestart, LazyFetchOnDemand, DRRS, Remote}

// ReconfigKind is what a scheduled reconfiguration does.
type ReconfigKind string

const (
	ScaleOut      ReconfigKind = "scale-out"
	ScaleIn       ReconfigKind = "scale-in"
	Rebalance     ReconfigKind = "rebalance"
	TaskMigration ReconfigKind = "task-migration"
	TwoOperators  ReconfigKind = "two-operators" // two operators of one job rescaled at once
)

// ReconfigKinds is the rotation of reconfiguration kinds.
var ReconfigKinds = []ReconfigKind{ScaleOut, Rebalance, ScaleIn, TaskMigration, TwoOperators}

// FaultKind is what a scheduled fault does.
type FaultKind string

const (
	KillWorker      FaultKind = "kill-worker"      // kill -9 a task worker; the jobs recover from a checkpoint
	KillController  FaultKind = "kill-controller"  // kill -9 the Temporal worker of the workflows
	RestartNATS     FaultKind = "restart-nats"     // kill -9 and start NATS
	RestartKafka    FaultKind = "restart-kafka"    // kill -9 and start the broker on its log
	RestartTemporal FaultKind = "restart-temporal" // kill -9 and start the dev server on its database
	PauseWorker     FaultKind = "pause-worker"     // SIGSTOP a worker, SIGCONT after Pause
)

// FaultKinds is the rotation of fault kinds.
var FaultKinds = []FaultKind{KillController, PauseWorker, RestartNATS, KillWorker, RestartKafka, RestartTemporal}

// Queries of the soak: each runs as its own job in every segment.
const (
	QueryCounter = "counter"
	QueryWindow  = "window"
	QueryJoin    = "join"
)

// Queries lists the soak's queries in the order reconfigurations visit them.
var Queries = []string{QueryCounter, QueryWindow, QueryJoin}

// reconfigurable are the operators of each query a reconfiguration may
// target (sources are not rescaled; the sinks write transactionally).
var reconfigurable = map[string][]string{
	QueryCounter: {"counter"},
	QueryWindow:  {"window"},
	QueryJoin:    {"q3-join", "q3-auctions", "q3-persons"},
}

// keyed are the operators with keyed state: only their load is measured
// per bucket, which a rebalance plans from.
var keyed = map[string][]string{
	QueryCounter: {"counter"},
	QueryWindow:  {"window"},
	QueryJoin:    {"q3-join"},
}

// Operators returns the operators of query q that the soak reconfigures.
func Operators(q string) []string { return slices.Clone(reconfigurable[q]) }

// Parallelism bounds of the reconfigured operators.
const (
	InitialParallelism = 2
	MinParallelism     = 1
	MaxParallelism     = 4
)

// Options shape a schedule.
type Options struct {
	Seed     uint64
	Duration time.Duration // the whole soak
	Segment  time.Duration // one segment's input; the last one may be shorter
	// Protocols is the rotation (default Rotation).
	Protocols []Protocol
	// TaskWorkers host tasks (kill-worker picks one); Workers are every
	// worker of the stack (pause-worker picks one).
	TaskWorkers, Workers []string
	// ReconfigEvery and FaultEvery bound the gap between two events of
	// the kind (uniform between the two values).
	ReconfigEvery, FaultEvery [2]time.Duration
}

// Defaults of Options.
var (
	DefaultSegment       = 3 * time.Minute
	DefaultReconfigEvery = [2]time.Duration{8 * time.Second, 22 * time.Second}
	DefaultFaultEvery    = [2]time.Duration{18 * time.Second, 40 * time.Second}
)

// Margins of a segment: no event in its first Warmup (the jobs deploy and
// take their first checkpoint) nor in its last Tail (a reconfiguration of
// a job whose input ended is rejected). A worker kill needs KillTail: the
// loss is noticed after 10 s of silence, and a job that loses a worker
// while it drains fails instead of recovering.
const (
	Warmup   = 15 * time.Second
	Tail     = 6 * time.Second
	KillTail = 45 * time.Second
	// MinSegment is the shortest segment with room for events.
	MinSegment = Warmup + Tail + 20*time.Second
)

// Segment is one set of jobs under one protocol.
type Segment struct {
	Index    int
	Protocol Protocol
	Start    time.Duration // from the soak's start, in schedule time
	Length   time.Duration // the jobs' input runs this long
	Events   []Event       // sorted by At, relative to the segment's start
}

// Event is one scheduled reconfiguration or fault.
type Event struct {
	At       time.Duration // from the segment's start
	Seq      int           // 1-based over the whole soak
	Reconfig *Reconfig     `json:",omitempty"`
	Fault    *Fault        `json:",omitempty"`
}

// Reconfig is a scheduled reconfiguration of one job.
type Reconfig struct {
	Kind  ReconfigKind
	Query string
	// Targets are the operators and the parallelism each should reach
	// (one; two for TwoOperators). Rebalance and TaskMigration keep it.
	Targets []Target
	// Task is the task index a TaskMigration moves.
	Task int
}

// Target is one operator's target parallelism.
type Target struct {
	Operator    string
	Parallelism int
}

// Fault is a scheduled fault.
type Fault struct {
	Kind   FaultKind
	Worker string        // kill-worker, pause-worker
	Pause  time.Duration // pause-worker: SIGSTOP to SIGCONT
}

// String is the event as the soak prints it.
func (e Event) String() string {
	switch {
	case e.Reconfig != nil:
		return e.Reconfig.String()
	case e.Fault != nil:
		return e.Fault.String()
	}
	return "nothing"
}

func (r Reconfig) String() string {
	var ts []string
	for _, t := range r.Targets {
		ts = append(ts, fmt.Sprintf("%s→%d", t.Operator, t.Parallelism))
	}
	s := fmt.Sprintf("%s %s %s", r.Kind, r.Query, strings.Join(ts, ","))
	if r.Kind == TaskMigration {
		s = fmt.Sprintf("%s %s %s-%d", r.Kind, r.Query, r.Targets[0].Operator, r.Task)
	}
	if r.Kind == Rebalance {
		s = fmt.Sprintf("%s %s %s", r.Kind, r.Query, r.Targets[0].Operator)
	}
	return s
}

func (f Fault) String() string {
	switch f.Kind {
	case KillWorker:
		return fmt.Sprintf("%s %s", f.Kind, f.Worker)
	case PauseWorker:
		return fmt.Sprintf("%s %s %.0fs", f.Kind, f.Worker, f.Pause.Seconds())
	}
	return string(f.Kind)
}

// Validate checks the options, naming the bad field and what is allowed.
func (o Options) Validate() error {
	if o.Duration < MinSegment {
		return fmt.Errorf("duration %s: must be at least %s (warm-up %s, tail %s and room for events)", o.Duration, MinSegment, Warmup, Tail)
	}
	if o.Segment < MinSegment {
		return fmt.Errorf("segment %s: must be at least %s", o.Segment, MinSegment)
	}
	if len(o.TaskWorkers) == 0 {
		return fmt.Errorf("task workers: none; the soak needs at least one worker that hosts tasks")
	}
	for _, p := range o.Protocols {
		if !slices.Contains(Rotation, p) {
			return fmt.Errorf("protocol %q: allowed values are %s", p, joinAny(Rotation))
		}
	}
	for _, g := range [][2]time.Duration{o.ReconfigEvery, o.FaultEvery} {
		if g[0] <= 0 || g[1] < g[0] {
			return fmt.Errorf("event gap %s..%s: want 0 < min ≤ max", g[0], g[1])
		}
	}
	return nil
}

func joinAny[T ~string](vs []T) string {
	var out []string
	for _, v := range vs {
		out = append(out, string(v))
	}
	return strings.Join(out, ", ")
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.Segment == 0 {
		o.Segment = DefaultSegment
	}
	if len(o.Protocols) == 0 {
		o.Protocols = Rotation
	}
	if o.ReconfigEvery == [2]time.Duration{} {
		o.ReconfigEvery = DefaultReconfigEvery
	}
	if o.FaultEvery == [2]time.Duration{} {
		o.FaultEvery = DefaultFaultEvery
	}
	if len(o.Workers) == 0 {
		o.Workers = o.TaskWorkers
	}
	return o
}

// Plan splits the soak into segments and draws every event from the seed.
// It is deterministic: the same options give the same plan.
func Plan(o Options) ([]Segment, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	// Where each rotation starts is drawn too, so seeds differ in more
	// than the gaps.
	protoAt := 0
	reconfAt := rng.IntN(len(ReconfigKinds))
	faultAt := rng.IntN(len(FaultKinds))
	queryAt := rng.IntN(len(Queries))
	killPending := false
	seq := 0
	var segs []Segment
	for start := time.Duration(0); o.Duration-start >= MinSegment; start += o.Segment {
		length := min(o.Segment, o.Duration-start)
		// A remainder too short for a segment of its own joins this one.
		if rest := o.Duration - start - length; rest > 0 && rest < MinSegment {
			length += rest
		}
		seg := Segment{Index: len(segs), Protocol: o.Protocols[protoAt%len(o.Protocols)], Start: start, Length: length}
		protoAt++
		par := map[string]map[string]int{}
		for _, q := range Queries {
			par[q] = map[string]int{}
			for _, op := range reconfigurable[q] {
				par[q][op] = InitialParallelism
			}
		}
		var evs []Event
		for at := Warmup + gap(rng, o.ReconfigEvery)/2; at <= length-Tail; at += gap(rng, o.ReconfigEvery) {
			q := Queries[queryAt%len(Queries)]
			queryAt++
			kind := ReconfigKinds[reconfAt%len(ReconfigKinds)]
			reconfAt++
			evs = append(evs, Event{At: at, Reconfig: drawReconfig(rng, kind, q, par)})
		}
		kills := 0
		for at := Warmup + gap(rng, o.FaultEvery)/2; at <= length-Tail; at += gap(rng, o.FaultEvery) {
			kind := nextFault(&faultAt, &killPending, seg.Protocol, kills, at, length)
			if kind == KillWorker {
				kills++
			}
			evs = append(evs, Event{At: at, Fault: drawFault(rng, kind, o)})
		}
		slices.SortStableFunc(evs, func(a, b Event) int { return int(a.At - b.At) })
		for i := range evs {
			seq++
			evs[i].Seq = seq
		}
		seg.Events = evs
		segs = append(segs, seg)
		if length != min(o.Segment, o.Duration-start) {
			break
		}
	}
	return segs, nil
}

// nextFault takes the next fault kind of the rotation. A worker kill may
// not happen everywhere: a remote segment runs without checkpoints, so a
// lost worker could not be recovered; a segment loses at most one worker
// (the stack keeps a survivor for each job), and not close to its end. A
// kill that may not happen at at stays pending and is the first fault
// where one may.
func nextFault(next *int, pending *bool, p Protocol, kills int, at, length time.Duration) FaultKind {
	killOK := p != Remote && kills == 0 && at <= length-KillTail
	if *pending && killOK {
		*pending = false
		return KillWorker
	}
	for {
		k := FaultKinds[*next%len(FaultKinds)]
		*next++
		if k == KillWorker && !killOK {
			*pending = true
			continue
		}
		return k
	}
}

func gap(rng *rand.Rand, g [2]time.Duration) time.Duration {
	// In steps of 100 ms, so printed times stay short.
	const step = 100 * time.Millisecond
	return g[0] + step*time.Duration(rng.Int64N(int64((g[1]-g[0])/step)+1))
}

// drawReconfig picks the operators and targets of a reconfiguration of
// kind on query q and applies it to par, the parallelism the schedule
// expects each operator to have (the driver checks it against the job).
func drawReconfig(rng *rand.Rand, kind ReconfigKind, q string, par map[string]map[string]int) *Reconfig {
	if kind == TwoOperators {
		q = QueryJoin // the only query with two reconfigurable operators
	}
	ops := reconfigurable[q]
	r := &Reconfig{Kind: kind, Query: q}
	pick := ops[rng.IntN(len(ops))]
	switch kind {
	case ScaleOut, ScaleIn:
		r.Targets = []Target{{pick, rescale(rng, kind, par[q][pick])}}
		// At a bound the rescale turned the other way: say so.
		if r.Targets[0].Parallelism > par[q][pick] {
			r.Kind = ScaleOut
		} else {
			r.Kind = ScaleIn
		}
	case Rebalance, TaskMigration:
		if kind == Rebalance {
			pick = keyed[q][rng.IntN(len(keyed[q]))]
		}
		r.Targets = []Target{{pick, par[q][pick]}}
		r.Task = rng.IntN(par[q][pick])
	case TwoOperators:
		i := rng.IntN(len(ops))
		a, b := ops[i], ops[(i+1)%len(ops)]
		for _, op := range []string{a, b} {
			k := ScaleOut
			if rng.IntN(2) == 0 {
				k = ScaleIn
			}
			r.Targets = append(r.Targets, Target{op, rescale(rng, k, par[q][op])})
		}
	}
	for _, t := range r.Targets {
		par[q][t.Operator] = t.Parallelism
	}
	return r
}

// rescale draws a new parallelism for a scale of kind from cur; at a bound
// it turns the other way, so every rescale changes the parallelism.
func rescale(rng *rand.Rand, kind ReconfigKind, cur int) int {
	if kind == ScaleOut && cur >= MaxParallelism {
		kind = ScaleIn
	}
	if kind == ScaleIn && cur <= MinParallelism {
		kind = ScaleOut
	}
	if kind == ScaleOut {
		return cur + 1 + rng.IntN(MaxParallelism-cur)
	}
	return MinParallelism + rng.IntN(cur-MinParallelism)
}

func drawFault(rng *rand.Rand, kind FaultKind, o Options) *Fault {
	f := &Fault{Kind: kind}
	switch kind {
	case KillWorker:
		f.Worker = o.TaskWorkers[rng.IntN(len(o.TaskWorkers))]
	case PauseWorker:
		f.Worker = o.Workers[rng.IntN(len(o.Workers))]
		// Below the worker watch's 10 s of allowed silence: a paused
		// worker must come back, not be replaced.
		f.Pause = time.Duration(2+rng.IntN(5)) * time.Second
	}
	return f
}

// Counts are the events of a plan by kind.
type Counts struct {
	Reconfigs, Faults int
	ByReconfig        map[ReconfigKind]int
	ByFault           map[FaultKind]int
	ByProtocol        map[Protocol]int
}

// Count tallies a plan.
func Count(segs []Segment) Counts {
	c := Counts{ByReconfig: map[ReconfigKind]int{}, ByFault: map[FaultKind]int{}, ByProtocol: map[Protocol]int{}}
	for _, s := range segs {
		c.ByProtocol[s.Protocol]++
		for _, e := range s.Events {
			if e.Reconfig != nil {
				c.Reconfigs++
				c.ByReconfig[e.Reconfig.Kind]++
			}
			if e.Fault != nil {
				c.Faults++
				c.ByFault[e.Fault.Kind]++
			}
		}
	}
	return c
}
