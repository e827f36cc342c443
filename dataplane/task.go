package dataplane

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"koala/dataplane/budget"
	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/dataplane/metrics"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// taskView is a task's immutable view of the deployment; a routing update
// swaps it atomically and the task picks it up at its next batch.
//
// Routing state is versioned per operator (control.MergeNewer): an update
// replaces only the operators for which it carries a newer routing epoch,
// so reconfigurations of different operators running at the same time do
// not undo each other's routing on the tasks they share.
type taskView struct {
	// epoch is the view's generation: the sum of every operator's routing
	// epoch, which grows with any change of any operator.
	epoch     int64
	dep       control.Deployment // merged per operator
	routes    []*route
	self      *route // the task's own operator: which task owns each bucket
	upstreams []string
	job       control.JobSpec
}

func newTaskView(dep control.Deployment, op string) *taskView {
	var gen int64
	for _, rt := range dep.Routing {
		gen += rt.Epoch
	}
	return &taskView{epoch: gen, dep: dep, routes: compileRoutes(dep, op), self: compileRoute(dep, op), upstreams: upstreamsOf(dep, op), job: dep.Job}
}

// mergeView installs the operators of dep that are newer than the task's
// view and returns the view before and after; after == before when nothing
// was newer. Updates come from control requests and from the task
// goroutine (in-band), so they are serialised here.
func (t *task) mergeView(dep control.Deployment) (before, after *taskView) {
	t.viewMu.Lock()
	defer t.viewMu.Unlock()
	before = t.view.Load()
	merged, changed := control.MergeNewer(before.dep, dep)
	if len(changed) == 0 {
		return before, before
	}
	after = newTaskView(merged, t.opName)
	t.view.Store(after)
	return before, after
}

// operatorEpochs reports the routing epoch of the task's own operator and
// of every operator it routes to.
func (v *taskView) operatorEpochs(self string) map[string]int64 {
	out := map[string]int64{self: v.dep.OperatorEpoch(self)}
	for _, rt := range v.routes {
		out[rt.op.Name] = rt.table.Epoch
	}
	return out
}

// taskStats are counters read by the metrics loop and status requests.
type taskStats struct {
	recordsIn    atomic.Uint64
	recordsOut   atomic.Uint64
	batches      atomic.Uint64
	batchNanos   atomic.Uint64
	batchMaxNano atomic.Uint64
	kafkaLag     atomic.Uint64
	forwarded    atomic.Uint64
	// batchHist holds this second's batch times; the metrics loop takes it.
	batchHist metrics.BatchHist
	// idle is the time spent waiting for input, blocked the time spent
	// waiting for a full downstream (wait_meter.go).
	idle, blocked waitMeter
}

func (s *taskStats) observeBatch(d time.Duration) {
	n := uint64(d.Nanoseconds())
	s.batches.Add(1)
	s.batchNanos.Add(n)
	s.batchHist.Observe(d)
	for {
		old := s.batchMaxNano.Load()
		if n <= old || s.batchMaxNano.CompareAndSwap(old, n) {
			return
		}
	}
}

// task is one parallel instance of an operator on this worker.
type task struct {
	w      *Worker
	jobID  string
	id     string
	opName string
	index  int
	spec   control.OperatorSpec
	// cost is the synthetic cost per record (control.ParamSyntheticCost).
	cost time.Duration

	view   atomic.Pointer[taskView]
	viewMu sync.Mutex // serialises mergeView
	stats  taskStats

	inbox chan *wire.Frame // processing tasks
	// inboxRecs counts the records of the data frames in inbox
	// (TaskInboxMaxRecords); processing tasks.
	inboxRecs *budget.Budget
	source    *sourceState // source tasks
	ledger    *sinkLedger  // terminal tasks
	latency   *sinkLatency // terminal tasks: producer → sink latency
	op        Operator     // processing tasks
	// routeDone remembers aligned route barriers for retried swaps.
	routeDone sync.Map
	// bucketIn counts the records a keyed task kept, per bucket: the
	// measured load a rebalance plans from. Written by the task goroutine,
	// read by status requests.
	bucketIn atomic.Pointer[[]atomic.Uint64]
	keyed    *keyedState          // stateful operators
	values   *keyValues           // collecting sinks
	dead     *kafkaio.DeadLetters // rejected records (kafkaio/deadletter.go)

	started atomic.Bool
	startMu sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	failMu  sync.Mutex
	failErr error

	// Owned by the task goroutine.
	barriers map[string]map[string]bool
	out      outputs
	gates    *routeGates     // new owner: direct records held (route_drain.go)
	drainTo  drainTargets    // old owner: new owners to tell (route_drain.go)
	wm       watermarks      // event-time progress (watermark.go)
	ckpt     checkpointState // aligned checkpoint barriers (checkpoint_barrier.go)
	handoffs handoffAcks     // old owner: handoffs not yet installed (handoff_ack.go)
	// orderedAfter: new owner: the latest epoch of each old owner's
	// handoff its output was ordered after (downstream_order.go).
	orderedAfter map[string]int64
	// pendingOrders: new owner: markers owed to downstream tasks it does
	// not know yet (downstream_order.go).
	pendingOrders []pendingOrder
	pendingSeen   *taskView // the last view orderPending looked at
	// orderHandoffs are the order-only handoffs ("reconfig/fromTask") a
	// task without keyed state took (handoff.go), reported like KLTInstalled.
	orderHandoffs sync.Map
	// lateBounder is op when it judges late records (set once at creation,
	// so the per-batch path does no type assertion).
	lateBounder LateBounder
	// handoffSends are the handoffs' sendHandoff goroutines (handoff.go):
	// the task is stopped only once they delivered their queues.
	handoffSends sync.WaitGroup
	// srcRefs finds the sources whose frames this task acknowledges
	// (credit_return.go) and the senders it holds (route_hold.go).
	srcRefs sourceRefs
	// heldSenders are the senders this task holds and why (route_hold.go).
	heldSenders map[string]holdReason
	// holdLimit is the job's ReconfigHoldMaxBytes (route_hold.go).
	holdLimit int
	// ctlQueued counts control requests on their way to the task
	// goroutine; ctlNudge wakes it when it waits on a hold
	// (route_hold.go).
	ctlQueued atomic.Int32
	ctlNudge  chan struct{}

	// Owned by the worker's metrics loop.
	lastEmit                                time.Time // when the last row was taken (zero: none yet)
	lastIn, lastOut, lastFetched, lastMoved uint64
	lastDead                                kafkaio.DeadLetterCounts
	lastLate                                uint64
	// snapshotMu serialises the task's snapshot loads (snapshot.go).
	snapshotMu sync.Mutex
}

func (t *task) key() string { return t.jobID + "/" + t.id }

func (t *task) terminal() bool { return len(t.view.Load().routes) == 0 }

func (t *task) fail(err error) {
	t.failMu.Lock()
	defer t.failMu.Unlock()
	if t.failErr == nil {
		t.failErr = err
		t.w.log.Error("task failed", "task", t.id, "job", t.jobID, "err", err)
	}
}

func (t *task) err() error {
	t.failMu.Lock()
	defer t.failMu.Unlock()
	return t.failErr
}

// start runs the task goroutine once.
func (t *task) start(parent context.Context) {
	t.startMu.Lock()
	defer t.startMu.Unlock()
	if t.started.Load() {
		return
	}
	ctx, cancel := context.WithCancel(parent)
	t.cancel = cancel
	t.done = make(chan struct{})
	t.started.Store(true)
	go func() {
		defer close(t.done)
		var err error
		if t.source != nil {
			err = t.runSource(ctx)
		} else {
			err = t.runProcessor(ctx)
		}
		if err != nil && ctx.Err() == nil {
			t.fail(err)
		}
	}()
}

// ended is closed when the task goroutine has ended (nil, blocking
// forever, while the task has not started).
func (t *task) ended() <-chan struct{} {
	t.startMu.Lock()
	defer t.startMu.Unlock()
	return t.done
}

// stop ends the task goroutine and waits for it, bounded by ctx.
func (t *task) stop(ctx context.Context) error {
	t.startMu.Lock()
	cancel, done := t.cancel, t.done
	t.startMu.Unlock()
	if cancel == nil {
		return t.closeResources()
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("task %s did not stop: %w", t.id, ctx.Err())
	}
	t.releaseSenders(true) // the goroutine that owned the gates has ended
	t.releaseAlignmentSenders()
	return t.closeResources()
}

func (t *task) closeResources() error {
	if t.dead != nil {
		t.dead.Close()
	}
	if t.source != nil {
		t.source.Close()
	}
	if t.keyed != nil {
		if err := t.keyed.close(); err != nil {
			return fmt.Errorf("task %s: close state: %w", t.id, err)
		}
	}
	if c, ok := t.op.(Closer); ok {
		return c.Close()
	}
	return nil
}

// runProcessor is the loop of every non-source task.
func (t *task) runProcessor(ctx context.Context) error {
	idle := time.NewTicker(20 * time.Millisecond)
	defer idle.Stop()
	if t.keyed != nil {
		defer t.keyed.pipe.abandon() // before the store closes
	}
	for {
		// wait_meter.go: times the wait; a returned fetch wakes it too.
		f, ok := t.nextFrame(ctx, idle.C, t.fetchReady())
		switch {
		case ctx.Err() != nil:
			return nil
		case ok:
			if err := t.handleFrame(ctx, f); err != nil {
				return err
			}
		case t.keyed != nil:
			if t.keyed.pipe.active() {
				if err := t.outsideBatch(ctx, func(ctx context.Context) error { return t.settleFetches(ctx, false) }); err != nil {
					return err
				}
				if err := t.releaseFrames(ctx); err != nil {
					return err
				}
			}
			// Progressive migration goes on when no input arrives.
			if err := t.afterBatch(ctx); err != nil {
				return err
			}
		}
	}
}

func (t *task) handleFrame(ctx context.Context, f *wire.Frame) error {
	if t.holdForCheckpoint(f) { // checkpoint_barrier.go
		return nil
	}
	view := t.view.Load()
	if err := t.orderPending(ctx, view); err != nil { // downstream_order.go
		return err
	}
	if t.gateable(view, f) {
		if f = t.admit(view, f); f == nil {
			return nil // held until the old owner's forwarded stream is drained
		}
	}
	return t.dispatch(ctx, view, f)
}

func (t *task) dispatch(ctx context.Context, view *taskView, f *wire.Frame) error {
	if f.Kind != wire.FrameData && t.keyed != nil {
		// Records before it that wait for fetches come first
		// (fetch_pipeline.go).
		if p := &t.keyed.pipe; p.active() || len(p.frames) > 0 {
			if t.deferFrame(view, f) {
				return t.releaseFrames(ctx)
			}
			if err := t.outsideBatch(ctx, t.drainFetches); err != nil {
				return err
			}
			if err := t.releaseFrames(ctx); err != nil {
				return err
			}
		}
	}
	return t.dispatchFrame(ctx, view, f)
}

// dispatchFrame handles f now.
func (t *task) dispatchFrame(ctx context.Context, view *taskView, f *wire.Frame) error {
	switch f.Kind {
	case wire.FrameData:
		start := time.Now()
		t.out.begin(view, t.index, t.jobID, t.id, len(f.Records))
		recs := t.tagInputs(f) // two-input operators: which input (join.go)
		if t.keyed != nil {
			recs = t.forwardForeign(view, recs)
		}
		t.stats.recordsIn.Add(uint64(len(recs)))
		if fa := t.w.opts.Faults; fa != nil {
			fa.BeforeBatch(t.jobID, t.opName, t.id, len(recs))
		}
		if err := t.spendCost(ctx, len(recs)); err != nil {
			return nil // the task is stopping (ctx done): its loop ends next
		}
		if t.ledger != nil && len(view.routes) == 0 {
			t.ledger.observe(recs) // and t.values, if any
			t.latency.observe(recs, start)
		}
		var err error
		if t.lateBounder != nil && t.gates != nil {
			if bound, fwd := t.forwardedLateBound(f); fwd {
				t.lateBounder.SetLateBound(bound, true)
				defer t.lateBounder.SetLateBound(0, false)
				if t.keyed != nil { // the bound holds for this batch only
					t.keyed.syncFetch = true
					defer func() { t.keyed.syncFetch = false }()
				}
			}
		}
		if t.keyed != nil {
			err = t.processKeyed(ctx, view, recs)
		} else {
			err = t.op.ProcessBatch(recs, t.out.emit)
			if err != nil {
				err = fmt.Errorf("operator %s: %w", t.opName, err)
			}
		}
		if err != nil {
			return err
		}
		// Rejected records are written before the batch's output and any
		// later barrier leave the task.
		t.dead.Flush(ctx)
		n, err := t.out.flush(ctx, t.w)
		t.stats.recordsOut.Add(uint64(n))
		t.stats.observeBatch(time.Since(start))
		if err != nil {
			return err
		}
		if f.Seq != 0 {
			// Processed and handed on: the source may read that much more.
			t.ackSource(view, f) // credit_return.go
		}
		f.Release() // the batch is done: its record array can be reused
		if t.keyed != nil {
			if err := t.releaseFrames(ctx); err != nil {
				return err
			}
			return t.afterBatch(ctx)
		}
		return nil
	case wire.FrameBarrier, wire.FrameEOS:
		return t.onBarrier(ctx, view, f)
	case wire.FrameRouteBarrier:
		return t.onRouteBarrier(ctx, view, f)
	case wire.FrameRouteDrained:
		return t.onRouteDrained(ctx, f)
	case wire.FrameHandedOff:
		return t.onHandedOff(ctx, f) // downstream_order.go
	case wire.FrameOrderAfter:
		t.onOrderAfter(f)
		return nil
	case wire.FrameCheckpoint:
		return t.onCheckpointBarrier(ctx, view, f) // checkpoint_barrier.go
	case wire.FrameWatermark:
		return t.onWatermark(ctx, view, f) // watermark.go
	case wire.FrameKLT:
		return t.installKLT(f)
	case wire.FrameKLTEnd:
		return t.endKLT(ctx, f)
	case wire.FrameKLTAck:
		return t.onKLTAck(f) // handoff_ack.go
	case wire.FrameControl:
		item := f.Ctl.(*controlItem)
		err := item.fn(ctx, t)
		item.reply <- err
		return nil
	}
	return fmt.Errorf("task %s: unexpected frame kind %v", t.id, f.Kind)
}

// onBarrier aligns barrier f over all upstream tasks, then forwards it
// downstream or, at a sink, announces it on NATS.
func (t *task) onBarrier(ctx context.Context, view *taskView, f *wire.Frame) error {
	if !t.align(view, f) {
		return nil
	}
	t.dead.Flush(ctx) // records rejected outside a data batch (e.g. on a watermark)
	if len(view.routes) == 0 {
		if tp, ok := t.twoPhase(); ok && f.Kind == wire.FrameEOS {
			// The input ended: the output is final (checkpoint_commit.go).
			if err := tp.finishInput(ctx); err != nil {
				return err
			}
		}
		t.w.announceBarrier(t.jobID, t.id, f.BarrierID)
		return nil
	}
	return broadcast(ctx, t.w, view, t.jobID, t.id, f.Kind, f.BarrierID)
}

// align records barrier f from its sender and reports whether every
// upstream task has now sent it.
func (t *task) align(view *taskView, f *wire.Frame) bool {
	if t.barriers == nil {
		t.barriers = map[string]map[string]bool{}
	}
	seen := t.barriers[f.BarrierID]
	if seen == nil {
		seen = map[string]bool{}
		t.barriers[f.BarrierID] = seen
	}
	seen[f.FromTask] = true
	for _, up := range view.upstreams {
		if !seen[up] {
			return false
		}
	}
	delete(t.barriers, f.BarrierID)
	return true
}

// forwardForeign sends records of buckets this task no longer owns to their
// owner (in-flight records routed with an old table) and returns the rest.
func (t *task) forwardForeign(view *taskView, recs []Record) []Record {
	if view.self == nil {
		return recs
	}
	mine := recs[:0] // filter in place: the batch's array is ours, no copy
	counts, n := t.bucketIn.Load(), max(view.self.buckets, 1)
	if counts == nil || len(*counts) != n {
		c := make([]atomic.Uint64, n)
		t.bucketIn.Store(&c)
		counts = &c
	}
	for i := range recs {
		b := statesvc.BucketOf(recs[i].Key, view.self.buckets)
		owner := view.self.owner(b)
		if owner.ID == t.id {
			mine = append(mine, recs[i])
			(*counts)[b].Add(1)
		} else {
			t.out.emitTo(owner, recs[i])
			t.stats.forwarded.Add(1)
		}
	}
	return mine
}

// broadcast sends a barrier to every task of every downstream operator.
func broadcast(ctx context.Context, w *Worker, view *taskView, jobID, from string, kind wire.FrameKind, barrierID string) error {
	for _, rt := range view.routes {
		for _, target := range rt.tasks {
			f := &wire.Frame{Kind: kind, JobID: jobID, FromTask: from, ToTask: target.ID, BarrierID: barrierID}
			if err := w.deliver(ctx, target, f); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *task) status(req control.TasksRequest) control.TaskStatus {
	withValues := req.WithValues
	view := t.view.Load()
	st := control.TaskStatus{
		TaskID:     t.id,
		Operator:   t.opName,
		Running:    t.started.Load(),
		Epoch:      view.dep.OperatorEpoch(t.opName),
		Epochs:     view.operatorEpochs(t.opName),
		RecordsIn:  t.stats.recordsIn.Load(),
		RecordsOut: t.stats.recordsOut.Load(),
	}
	if t.ledger != nil {
		st.SinkReceived, st.SinkDistinct, st.SinkDuplicates = t.ledger.counts()
		st.SinkReordered, st.SinkOrderChecked = t.ledger.reorders()
		st.SinkLatency = t.latency.snapshot()
	}
	if t.values != nil && withValues {
		st.KeyValues = t.values.snapshot()
	}
	t.routeDone.Range(func(k, _ any) bool {
		st.RouteBarriers = append(st.RouteBarriers, k.(string))
		return true
	})
	sort.Strings(st.RouteBarriers)
	t.orderHandoffs.Range(func(k, _ any) bool {
		st.KLTInstalled = append(st.KLTInstalled, k.(string))
		return true
	})
	sort.Strings(st.KLTInstalled)
	if t.keyed != nil {
		st.KLTSize = t.keyed.klt.Len()
		t.keyed.installed.Range(func(k, _ any) bool {
			st.KLTInstalled = append(st.KLTInstalled, k.(string))
			return true
		})
		sort.Strings(st.KLTInstalled)
		st.KeysFetched = t.keyed.keysFetched.Load()
		if counts := t.bucketIn.Load(); counts != nil && req.WithBucketLoad {
			st.BucketRecords = make([]uint64, len(*counts))
			for b := range *counts {
				st.BucketRecords[b] = (*counts)[b].Load()
			}
		}
		st.BytesMoved = t.keyed.bytesMoved.Load()
		st.Migrated = t.keyed.lastMigrated.Load()
		st.MigrationOwed = t.keyed.pendingReport()
		// Only once started: a snapshot load replaces the store of a task
		// that has not started yet, while this reads it.
		if cs, ok := t.keyed.store.(interface{ CacheStats() statesvc.CacheStats }); ok && st.Running {
			c := cs.CacheStats()
			st.StateCache = &control.StateCacheStats{Lookups: c.Lookups, Hits: c.Hits, LimitBytes: c.LimitBytes}
		}
		if st.Running && !t.keyed.shared { // a shared store sizes the whole server
			st.StateBytes = t.keyed.size.get(time.Now(), t.keyed.store.ApproxSize)
		}
	}
	if t.source != nil {
		st.Paused = t.source.paused.Load()
		st.Offsets = t.source.Positions()
	}
	if err := t.err(); err != nil {
		st.Error = err.Error()
	}
	return st
}
