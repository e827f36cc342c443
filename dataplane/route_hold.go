package dataplane

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// Backpressure on the senders a new owner holds (route_drain.go).
//
// A new owner holds the direct records of an upstream task until the old
// owner has forwarded everything that upstream routed to it the old way.
// It cannot stop reading the held sender: all senders share its inbox (and
// its exchange lane from each worker, exchange/peers.go) with the old
// owner's forwarded records and its drained marker, which must get through. Withholding
// credit does not reach far enough either: a source's held frames are
// acknowledged only once processed (credit_return.go), which bounds what a
// source sends, but most senders are not sources and send on no credit.
//
// So a new owner whose held records reach ReconfigHoldMaxBytes tells each
// sender it holds more of to stop sending to it (a hold), and lifts the
// hold once that sender is drained or the held records are down to half
// the bound. A held sender's task waits before it hands the new owner its
// next frame, which backs up into its own inbox and, through the bounded
// queues and credits, to the sources. The holding area is thus bounded by
// the bound plus what was already on its way when the hold came — frames
// in the new owner's inbox and in the exchange's queues, all bounded in
// frames — and what a held sender sends to reach a control request (its
// own inbox, see below).
//
// A held task must still get to its control requests: its in-band routing
// update sends the route barrier whose arrival at the old owner ends the
// hold, and the controller broadcasts the new routing (which sends records
// to the new owner) before it. A held task that has a control request
// waiting therefore sends on until it has run it (controlWaiting).
//
// Holds travel as FrameCredit frames that name them in BarrierID, with a
// generation in Seq: like acknowledgements they are applied on arrival,
// never queued behind records, and resent for a while in case a stream
// broke (credit_return.go); a signal older than the last one applied
// changes nothing.

// Hold signals (FrameCredit.BarrierID).
const (
	holdPause   = "hold"
	holdRelease = "release"
)

// heldRecordOverhead is what a held record costs besides its key and value
// (its Record header).
const heldRecordOverhead = 64

// recordsBytes is the memory the records of a held frame take.
func recordsBytes(recs []Record) int {
	n := 0
	for i := range recs {
		n += len(recs[i].Key) + len(recs[i].Value) + heldRecordOverhead
	}
	return n
}

// holdBytes is the task's ReconfigHoldMaxBytes (createTask validated it).
func (t *task) holdBytes() int {
	if t.holdLimit > 0 {
		return t.holdLimit
	}
	return control.DefaultReconfigHoldBytes
}

type holdKey struct{ job, sender, receiver string }

type sendHold struct {
	gen      uint64
	paused   bool
	released chan struct{} // closed when the hold is lifted
}

// sendHolds are the holds receivers put on this worker's tasks as senders.
type sendHolds struct {
	mu sync.Mutex
	m  map[holdKey]*sendHold
	// active counts holds in force, so that a flush with none looks no
	// further; waiting counts tasks waiting on one now.
	active  atomic.Int32
	waiting atomic.Int32
	gen     atomic.Uint64
}

// nextHoldGen numbers this worker's hold signals. The numbers start at
// the clock, so those of a receiver restarted elsewhere come after.
func (w *Worker) nextHoldGen() uint64 {
	for {
		g := w.holds.gen.Load()
		if g == 0 {
			w.holds.gen.CompareAndSwap(0, uint64(time.Now().UnixNano()))
			continue
		}
		if w.holds.gen.CompareAndSwap(g, g+1) {
			return g + 1
		}
	}
}

// applyHold puts (pause) or lifts receiver's hold on sender, unless a
// newer signal of the pair was applied already.
func (w *Worker) applyHold(jobID, sender, receiver string, gen uint64, pause bool) {
	h := &w.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[holdKey]*sendHold{}
	}
	k := holdKey{job: jobID, sender: sender, receiver: receiver}
	s := h.m[k]
	if s == nil {
		s = &sendHold{}
		h.m[k] = s
	}
	if gen <= s.gen {
		return
	}
	s.gen = gen
	switch {
	case pause && !s.paused:
		s.paused, s.released = true, make(chan struct{})
		h.active.Add(1)
	case !pause && s.paused:
		s.paused = false
		close(s.released)
		h.active.Add(-1)
	}
}

// forgetJob drops the holds of a job whose tasks are all gone from here,
// lifting any still in force.
func (h *sendHolds) forgetJob(jobID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, s := range h.m {
		if k.job != jobID {
			continue
		}
		if s.paused {
			close(s.released)
			h.active.Add(-1)
		}
		delete(h.m, k)
	}
}

// released returns the channel closed when the hold on the pair is
// lifted, nil when there is none.
func (h *sendHolds) released(k holdKey) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.m[k]; s != nil && s.paused {
		return s.released
	}
	return nil
}

// awaitSend waits while receiver to holds task from of job, unless the
// task has a control request to get to.
func (w *Worker) awaitSend(ctx context.Context, jobID, from, to string) error {
	if w.holds.active.Load() == 0 {
		return nil
	}
	k := holdKey{job: jobID, sender: from, receiver: to}
	var t *task
	for {
		released := w.holds.released(k)
		if released == nil {
			return nil
		}
		if t == nil {
			w.mu.Lock()
			t = w.tasks[jobID+"/"+from]
			w.mu.Unlock()
			if t == nil {
				return nil
			}
		}
		if t.controlWaiting() {
			return nil
		}
		w.holds.waiting.Add(1)
		select {
		case <-released:
		case <-t.ctlNudge:
		case <-ctx.Done():
		}
		w.holds.waiting.Add(-1)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// controlWaiting reports whether a control request waits for the task
// goroutine.
func (t *task) controlWaiting() bool {
	if t.source != nil && len(t.source.cmds) > 0 {
		return true
	}
	return t.ctlQueued.Load() > 0
}

// nudgeControl wakes the task goroutine if it waits on a hold: a control
// request is on its way.
func (t *task) nudgeControl() {
	select {
	case t.ctlNudge <- struct{}{}:
	default:
	}
}

// onHoldFrame applies a hold signal that arrived over the exchange.
func (w *Worker) onHoldFrame(f *wire.Frame) {
	switch f.BarrierID {
	case holdPause, holdRelease:
		w.applyHold(f.JobID, f.ToTask, f.FromTask, f.Seq, f.BarrierID == holdPause)
	default:
		w.log.Warn("unknown credit signal ignored", "signal", f.BarrierID, "from", f.FromTask, "to", f.ToTask)
	}
}

// signalSender puts (pause) or lifts this task's hold on sender task ref.
func (t *task) signalSender(ref control.TaskRef, pause bool) {
	gen := t.w.nextHoldGen()
	if ref.WorkerID == t.w.opts.ID {
		t.w.applyHold(t.jobID, ref.ID, t.id, gen, pause)
		return
	}
	t.w.credits.addHold(creditKey{job: t.jobID, source: ref.ID, from: t.id, hold: true}, ref, gen, pause)
}

// holdFrame holds f of sender s behind its earlier held frames and, past
// the bound, holds the sender too.
func (t *task) holdFrame(view *taskView, s string, f *wire.Frame) {
	g := t.gates
	g.held[s] = append(g.held[s], f)
	g.n += len(f.Records)
	g.bytes += recordsBytes(f.Records)
	if _, held := g.paused[s]; held || g.bytes < g.limit {
		return
	}
	// A sender not in view cannot be held; what it sends is bounded by
	// whatever stopped it appearing there.
	if ref, ok := t.srcRefs.lookup(view, s); ok {
		t.holdSender(ref, holdForDrain)
		if g.paused == nil {
			g.paused = map[string]control.TaskRef{}
		}
		g.paused[s] = ref
		t.w.log.Debug("holding a sender: direct records held until old owners drain reached the bound",
			"task", t.id, "sender", s, "held_records", g.n, "held_bytes", g.bytes, "bound", g.limit)
	}
}

// releaseSenders lifts the holds on senders that are drained (their
// records are no longer held) or, once the held records are down to half
// the bound, on every sender; on all of them when all is set (the task
// stops).
func (t *task) releaseSenders(all bool) {
	g := t.gates
	if g == nil || len(g.paused) == 0 {
		return
	}
	for s, ref := range g.paused {
		if all || (!g.undrained(s) && !g.waitsAfter(s)) || 2*g.bytes < g.limit {
			t.unholdSender(ref, holdForDrain)
			delete(g.paused, s)
		}
	}
}

// Why a task holds a sender: the route gates (above) and a checkpoint
// alignment (checkpoint_barrier.go) hold senders each by their own rule,
// and a sender both hold stays held until both let it go.
type holdReason uint8

const (
	holdForDrain holdReason = 1 << iota
	holdForAlignment
)

// holdSender holds ref for why, signalling it when nothing held it yet.
// Task goroutine only.
func (t *task) holdSender(ref control.TaskRef, why holdReason) {
	cur := t.heldSenders[ref.ID]
	if cur&why != 0 {
		return
	}
	if cur == 0 {
		t.signalSender(ref, true)
	}
	if t.heldSenders == nil {
		t.heldSenders = map[string]holdReason{}
	}
	t.heldSenders[ref.ID] = cur | why
}

// unholdSender drops why's hold on ref and lifts the hold once no reason
// is left. Task goroutine only.
func (t *task) unholdSender(ref control.TaskRef, why holdReason) {
	cur := t.heldSenders[ref.ID]
	if cur&why == 0 {
		return
	}
	if cur &^= why; cur != 0 {
		t.heldSenders[ref.ID] = cur
		return
	}
	delete(t.heldSenders, ref.ID)
	t.signalSender(ref, false)
}
