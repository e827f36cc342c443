package dataplane

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// Event time and watermarks
//
// Every record carries its event time (Record.EventTime, unix nanoseconds);
// Kafka sources take it from the Kafka record timestamp. A source task
// tracks the largest event time per partition it reads and, at most every
// WatermarkInterval when it advances, broadcasts a watermark
//
//	min over active partitions (largest event time seen) − MaxOutOfOrdernessMs
//
// to every downstream task as an in-band FrameWatermark, ordered with the
// records it sent before. A partition is idle (it does not hold the
// watermark back) when nothing came from it for SourceIdleTimeoutMs (1 s)
// and a fresh end offset shows no backlog in it; while its end offset
// cannot be looked up (a broker outage), and after that until it delivers
// again, it is not idle (idleness.go). When every partition is idle the
// largest event time of all partitions counts. A partition waking up wakes
// all of them for that long, so a burst after a quiet spell does not run
// the watermark past partitions fetched later. A source that has
// never seen a record and whose partitions are all idle declares itself
// idle, so an empty source does not stall the job; its downstream tasks then
// leave it out of their minimum until it sends a watermark again.
//
// Every other task keeps the latest watermark of each of its current
// upstream tasks; when the minimum over the non-idle ones advances, it calls
// the operator's OnWatermark hook (WatermarkOperator), sends what the hook
// emitted, and then forwards the watermark downstream. Watermarks never go
// backwards. At the end of input (the finish command) sources send
// MaxWatermark before end-of-stream, so every pending window fires.

const (
	// DefaultMaxOutOfOrderness is the default bound on event-time disorder.
	DefaultMaxOutOfOrderness = 200 * time.Millisecond
	// WatermarkInterval is the shortest time between two watermarks a
	// source sends.
	WatermarkInterval = 50 * time.Millisecond
	// DefaultSourceIdleTimeout marks a partition idle when nothing came
	// from it for that long.
	DefaultSourceIdleTimeout = time.Second
)

// MinWatermark is the watermark before any was seen; MaxWatermark ends the
// event time of a stream (every window fires).
const (
	MinWatermark int64 = math.MinInt64
	MaxWatermark int64 = math.MaxInt64
)

// WatermarkOperator is implemented by operators that act when event time
// advances (windows, windowed joins, timers). OnWatermark runs on the task
// goroutine between batches. For a StatefulOperator, st holds the state of
// the keys named by DueKeys (TimerKeys), loaded like a batch's keys and
// written back afterwards; for other operators st is nil.
type WatermarkOperator interface {
	OnWatermark(wm int64, st *State, emit Emit) error
}

// LateBounder is implemented by operators that drop late records (event
// time ≤ their watermark). While a new owner takes records its old owner
// forwards after a handoff, the runtime sets the bound those records are
// judged by (ok) — the old owner's watermark at the handoff, since this
// task's own watermark may already be past records the upstreams routed to
// the old owner before their later watermarks reached this task — and
// clears it (!ok) after the batch. The windows those records join fire at
// this task's next watermark, which the route gates hold back until the old
// owner is drained.
type LateBounder interface {
	SetLateBound(wm int64, ok bool)
}

// LateBound implements LateBounder: embed it and judge records with IsLate.
type LateBound struct {
	bound int64
	set   bool
}

// SetLateBound implements LateBounder.
func (l *LateBound) SetLateBound(wm int64, ok bool) { l.bound, l.set = wm, ok }

// IsLate reports whether a record with event time ts is late for an
// operator at watermark wm, or at the bound the runtime set.
func (l *LateBound) IsLate(ts, wm int64) bool {
	if l.set {
		return ts <= l.bound
	}
	return ts <= wm
}

// TimerKeys is implemented by stateful WatermarkOperators: DueKeys names
// the keys whose state OnWatermark(wm) needs.
type TimerKeys interface {
	DueKeys(wm int64) [][]byte
}

// stateIndexer is implemented by the runtime's own timer-driven operators
// (windows, windowed joins). Their in-memory index of pending timers is
// derived from state: the runtime indexes the values of the buckets whose
// timers it does not know (at the task's first watermark, and for buckets
// gained without their timers), while timers of keys that move here come
// with their handoff (timer_sync.go), so the pending windows of keys that
// moved to this task fire here.
type stateIndexer interface {
	indexedStates() []string
	resetIndex()
	indexValue(state string, key, value []byte)
}

// StateTimers is stateIndexer for operators outside this package (e.g.
// queries whose timers are per key, like an auction's expiry): the runtime
// calls IndexTimers with the values of TimerStates of the buckets whose
// timers it does not know — all of the task's buckets at its first
// watermark, and buckets that arrived without their timers — so timers of
// keys that arrived by migration fire here. An operator that also
// implements TimerIndexOwner gets its timers handed over with its keys;
// otherwise a new owner pulls the keys of its new buckets at its first
// watermark after a handoff (timer_sync.go). ResetTimers is not called.
type StateTimers interface {
	TimerStates() []string
	ResetTimers()
	IndexTimers(state string, key, value []byte)
}

type stateTimers struct{ StateTimers }

func (s stateTimers) indexedStates() []string { return s.TimerStates() }
func (s stateTimers) resetIndex()             { s.ResetTimers() }
func (s stateTimers) indexValue(state string, key, value []byte) {
	s.IndexTimers(state, key, value)
}

// indexerOf returns the timer index of op, if it keeps one.
func indexerOf(op StatefulOperator) (stateIndexer, bool) {
	if ix, ok := op.(stateIndexer); ok {
		return ix, true
	}
	if st, ok := op.(StateTimers); ok {
		return stateTimers{st}, true
	}
	return nil, false
}

// CounterReporter is implemented by operators that count noteworthy
// records (late events, malformed input). Worker.OperatorCounters reads it.
type CounterReporter interface {
	Counters() map[string]uint64
}

// upstreamWM is the last watermark one upstream task sent.
type upstreamWM struct {
	wm   int64
	idle bool
}

// watermarks is a task's event-time progress; owned by the task goroutine
// except pub, which status readers load.
type watermarks struct {
	// Source tasks.
	bound      int64
	boundSet   bool
	partMax    map[int32]int64
	lastPos    map[int32]int64
	parts      []kafkaio.PartitionPos // reused cut of the source's positions
	lastActive map[int32]time.Time
	partMaxAt  map[int32]int64 // partMax when last checked
	idleRule   idleRule        // idleness.go
	outages    outages         // idleness.go
	started    time.Time
	sentAt     time.Time
	lastCheck  time.Time

	// Every task: what was last sent downstream.
	sent     int64
	sentIdle bool
	anySent  bool

	// Processing tasks.
	up      map[string]upstreamWM
	current int64
	idle    bool
	inited  bool

	// What the timer index of a stateIndexer operator covers (timer_sync.go).
	timers timerSync

	pub    atomic.Int64 // current watermark, for status and tests
	pubSet atomic.Bool
}

func (w *watermarks) init() {
	if !w.inited {
		w.inited = true
		w.current = MinWatermark
		w.sent = MinWatermark
		w.up = map[string]upstreamWM{}
		w.pub.Store(MinWatermark)
		w.pubSet.Store(true)
	}
}

// observe notes the event time of a record read from partition p.
func (w *watermarks) observe(p int32, ts int64) {
	if w.partMax == nil {
		w.partMax = map[int32]int64{}
	}
	if m, ok := w.partMax[p]; !ok || ts > m {
		w.partMax[p] = ts
	}
}

// MaxOutOfOrderness parses the job parameter (milliseconds).
func MaxOutOfOrderness(params map[string]string) (time.Duration, error) {
	return durationParam(params, control.ParamMaxOutOfOrderness, DefaultMaxOutOfOrderness)
}

func durationParam(params map[string]string, name string, def time.Duration) (time.Duration, error) {
	v, ok := params[name]
	if !ok || v == "" {
		return def, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("%s %q: want a whole number of milliseconds ≥ 0", name, v)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// sourceWatermark computes the source's watermark and sends it when it
// advanced and WatermarkInterval passed; final sends MaxWatermark.
func (t *task) sourceWatermark(ctx context.Context, final bool) error {
	w := &t.wm
	w.init()
	now := time.Now()
	if w.started.IsZero() {
		w.started = now
	}
	// A source that did not poll for a while (paused for a reconfiguration,
	// blocked by backpressure) did not see its partitions idle: shift their
	// activity clocks by the gap so none is declared idle for it.
	if gap := now.Sub(w.lastCheck); !w.lastCheck.IsZero() && gap > 5*WatermarkInterval {
		w.started = w.started.Add(gap)
		for p, at := range w.lastActive {
			w.lastActive[p] = at.Add(gap)
		}
	}
	w.lastCheck = now
	if final {
		if w.sent == MaxWatermark && !w.sentIdle {
			return nil
		}
		return t.sendWatermark(ctx, MaxWatermark, false, now)
	}
	if w.anySent && now.Sub(w.sentAt) < WatermarkInterval {
		return nil
	}
	if !w.boundSet {
		params := t.view.Load().job.Params
		d, err := MaxOutOfOrderness(params)
		if err != nil {
			return fmt.Errorf("source %s: %w", t.id, err)
		}
		rule, err := sourceIdleRule(params)
		if err != nil {
			return fmt.Errorf("source %s: %w", t.id, err)
		}
		w.bound, w.idleRule, w.boundSet = d.Nanoseconds(), rule, true
	}
	if w.lastPos == nil {
		w.lastPos, w.lastActive, w.partMaxAt = map[int32]int64{}, map[int32]time.Time{}, map[int32]int64{}
		w.outages = outages{}
	}
	idleAfter := w.idleRule.IdleTimeout
	w.parts = t.source.AppendPositions(w.parts[:0])
	// Partitions that made progress are active now. One waking up after
	// being idle wakes every partition: input that resumes after a quiet
	// spell comes in bursts, and the partition fetched first must not run
	// the watermark past the others' backlog.
	wake := false
	for _, pp := range w.parts {
		p, pos := pp.Partition, pp.Next
		last, seen := w.lastPos[p]
		w.lastPos[p] = pos
		if seen && pos == last && w.partMax[p] == w.partMaxAt[p] {
			continue
		}
		w.partMaxAt[p] = w.partMax[p]
		if prev, ok := w.lastActive[p]; !ok && now.Sub(w.started) > idleAfter || ok && now.Sub(prev) > idleAfter {
			wake = true
		}
		w.lastActive[p] = now
	}
	anyFresh := false
	for _, pp := range w.parts {
		if !pp.EndAt.IsZero() && now.Sub(pp.EndAt) <= w.idleRule.EndMaxAge {
			anyFresh = true // the source reaches the broker
		}
	}
	activeMin, allMax := MaxWatermark, MinWatermark
	anyActive, anyData := false, false
	for _, pp := range w.parts {
		p := pp.Partition
		if wake {
			w.lastActive[p] = now
		}
		active, ok := w.lastActive[p]
		if !ok {
			active = w.started
		}
		// A partition is idle when nothing came from it for a while and a
		// fresh end offset shows no backlog (idleness.go).
		looked := !pp.EndAt.IsZero() // a lookup answered (a fetch's end is not one)
		recent := looked && now.Sub(pp.EndAt) <= w.idleRule.EndMaxAge
		ps := partitionState{Quiet: now.Sub(active), EndKnown: pp.Known, CaughtUp: pp.Next >= pp.HighWatermark,
			Fresh: recent && !pp.EndAt.Before(active)}
		ps.InOutage, ps.HeldFor = w.outages.note(pp, looked && !recent, anyFresh, now)
		idle := partitionIdle(w.idleRule, ps)
		m, has := w.partMax[p]
		if has {
			anyData = true
			allMax = max(allMax, m)
		}
		if !idle {
			anyActive = true
			if !has {
				m = MinWatermark
			}
			activeMin = min(activeMin, m)
		}
	}
	switch {
	case anyActive:
		if activeMin == MinWatermark {
			return nil // an active partition has sent nothing yet
		}
		return t.sendWatermark(ctx, subBound(activeMin, w.bound), false, now)
	case anyData:
		return t.sendWatermark(ctx, subBound(allMax, w.bound), false, now)
	default:
		return t.sendWatermark(ctx, w.sent, true, now)
	}
}

func subBound(ts, bound int64) int64 {
	if ts < MinWatermark+bound+1 {
		return MinWatermark
	}
	return ts - bound
}

// sendWatermark broadcasts wm (or the idle status) if it says something new.
func (t *task) sendWatermark(ctx context.Context, wm int64, idle bool, now time.Time) error {
	w := &t.wm
	if wm < w.sent {
		wm = w.sent
	}
	if w.anySent && wm == w.sent && idle == w.sentIdle {
		return nil
	}
	if idle && w.anySent && w.sentIdle {
		return nil
	}
	w.sent, w.sentIdle, w.anySent, w.sentAt = wm, idle, true, now
	if !idle {
		w.pub.Store(wm)
	}
	return broadcastWatermark(ctx, t, wm, idle)
}

// broadcastWatermark sends a watermark frame to every downstream task.
func broadcastWatermark(ctx context.Context, t *task, wm int64, idle bool) error {
	view := t.view.Load()
	if err := t.orderPending(ctx, view); err != nil {
		return err
	}
	var flag int64
	if idle {
		flag = 1
	}
	for _, rt := range view.routes {
		for _, target := range rt.tasks {
			f := &wire.Frame{Kind: wire.FrameWatermark, JobID: t.jobID, FromTask: t.id, ToTask: target.ID,
				Records: []Record{{EventTime: wm, Offset: flag, Partition: -1}}}
			if err := t.w.deliver(ctx, target, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// onWatermark handles a watermark from an upstream task.
func (t *task) onWatermark(ctx context.Context, view *taskView, f *wire.Frame) error {
	if len(f.Records) != 1 {
		return fmt.Errorf("task %s: watermark frame from %s holds %d records, want 1", t.id, f.FromTask, len(f.Records))
	}
	w := &t.wm
	w.init()
	r := f.Records[0]
	u, seen := w.up[f.FromTask]
	if !seen || r.EventTime > u.wm {
		u.wm = r.EventTime
	}
	u.idle = r.Offset == 1
	w.up[f.FromTask] = u

	next, anyActive := MaxWatermark, false
	for _, id := range view.upstreams {
		u, ok := w.up[id]
		if ok && u.idle {
			continue
		}
		anyActive = true
		if !ok {
			next = MinWatermark
			break
		}
		next = min(next, u.wm)
	}
	if !anyActive {
		if !w.idle {
			w.idle = true
			return t.sendWatermark(ctx, w.current, true, time.Now())
		}
		return nil
	}
	wasIdle := w.idle
	w.idle = false
	if next > w.current {
		w.current = next
		w.pub.Store(next)
		if err := t.fireWatermark(ctx, view, next); err != nil {
			return err
		}
	} else if !wasIdle {
		return nil
	}
	return t.sendWatermark(ctx, w.current, false, time.Now())
}

// fireWatermark calls the operator's hook and sends what it emitted.
func (t *task) fireWatermark(ctx context.Context, view *taskView, wm int64) error {
	wop, ok := t.op.(WatermarkOperator)
	if !ok {
		return nil
	}
	if err := t.orderPending(ctx, view); err != nil {
		return err
	}
	t.out.begin(view, t.index, t.jobID, t.id, 0)
	var err error
	if t.keyed != nil {
		err = t.keyedWatermark(ctx, view, wop, wm)
	} else {
		err = wop.OnWatermark(wm, nil, t.out.emit)
	}
	if err != nil {
		return fmt.Errorf("operator %s: on watermark: %w", t.opName, err)
	}
	n, err := t.out.flush(ctx, t.w)
	t.stats.recordsOut.Add(uint64(n))
	return err
}

// keyedWatermark loads the state of the keys the operator names (fetching
// the due keys still held by another task), runs the hook and writes back.
func (t *task) keyedWatermark(ctx context.Context, view *taskView, wop WatermarkOperator, wm int64) error {
	ks := t.keyed
	if ix, ok := indexerOf(ks.op); ok {
		if err := t.syncTimers(ctx, view, ix); err != nil {
			return err
		}
	}
	var due [][]byte
	if tk, ok := ks.op.(TimerKeys); ok {
		due = tk.DueKeys(wm)
	}
	st := newState(ks.names, len(due))
	seen := map[string]bool{}
	remote := map[string][][]byte{}
	var local []int
	for _, k := range due {
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		if view.self != nil && view.self.owner(statesvc.BucketOf(k, ks.buckets)).ID != t.id {
			continue // moved away: its new owner fires it
		}
		if owner, ok := ks.mig.lookupKey(k); ok {
			for o := range strings.SplitSeq(owner, statesvc.OwnerSep) {
				remote[o] = append(remote[o], k)
			}
		} else {
			local = append(local, st.addKey(k))
		}
	}
	fetched, taken, err := t.fetchDue(ctx, remote)
	if err != nil {
		return err
	}
	for slot, v := range fetched {
		st.setFetched(slot, v)
	}
	if err := ks.loadLocal(st, local); err != nil {
		return err
	}
	if err := wop.OnWatermark(wm, st, t.out.emit); err != nil {
		return err
	}
	kvs := ks.writes(st, nil)
	ks.localIdx.addKVs(kvs)
	if err := ks.store.MultiPut(kvs); err != nil {
		return fmt.Errorf("task %s: write state: %w", t.id, err)
	}
	ks.forgetTaken(remote, taken)
	return nil
}

// Watermarks returns the current watermark of every started task of job on
// this worker (MinWatermark before the first one).
func (w *Worker) Watermarks(jobID string) map[string]int64 {
	out := map[string]int64{}
	for _, t := range w.jobTasks(jobID, nil) {
		if !t.wm.pubSet.Load() {
			out[t.id] = MinWatermark
			continue
		}
		out[t.id] = t.wm.pub.Load()
	}
	return out
}
