package dataplane

import (
	"context"
	"sync"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// Credit returns: the receiving side of a source's read-ahead bound
// (source_credit.go). A task that processed a data frame numbered by a
// source acknowledges the number to that source: directly when the source
// lives on the same worker, else through the worker's credit returner,
// which sends FrameCredit frames over the exchange from its own
// goroutine. The task never waits for that send: its worker's stream to
// the source's worker may be full of records for tasks that are
// themselves waiting on this one, and an acknowledgement that waited
// there could close a cycle.

// Timing of the credit returner.
const (
	// creditSendTimeout bounds one send, so a stream to a worker that does
	// not take frames holds back no acknowledgement meant for another.
	creditSendTimeout = time.Second
	// An acknowledgement is sent again every creditResendEvery for
	// creditResendFor after it changed: one lost with a broken stream
	// would otherwise leave a source waiting forever when it has nothing
	// more in flight to that task. Acknowledgements are cumulative, so
	// repeats change nothing.
	creditResendEvery = time.Second
	creditResendFor   = 10 * time.Second
)

// sourceRefs resolves the senders of numbered frames to their tasks, from
// the view the task last looked them up in. Owned by the task goroutine.
type sourceRefs struct {
	view *taskView
	refs map[string]control.TaskRef
}

func (r *sourceRefs) lookup(view *taskView, id string) (control.TaskRef, bool) {
	if r.view != view {
		r.view, r.refs = view, make(map[string]control.TaskRef, len(view.upstreams))
		for _, t := range view.dep.Tasks {
			r.refs[t.ID] = t
		}
	}
	ref, ok := r.refs[id]
	return ref, ok
}

// ackSource acknowledges processed data frame f to the source that sent
// it (f.Seq ≠ 0 only on a source's frames).
func (t *task) ackSource(view *taskView, f *wire.Frame) {
	src, ok := t.srcRefs.lookup(view, f.FromTask)
	if !ok {
		return // a source no longer deployed reads nothing more
	}
	if src.WorkerID == t.w.opts.ID {
		t.w.creditLocal(t.jobID, src.ID, t.id, f.Seq)
		return
	}
	t.w.credits.add(creditKey{job: t.jobID, source: src.ID, from: t.id}, src, f.Seq)
}

// creditLocal applies task from's acknowledgement of seq to source task
// source of job on this worker; a source that is gone needs none.
func (w *Worker) creditLocal(jobID, source, from string, seq uint64) {
	w.mu.Lock()
	t := w.tasks[jobID+"/"+source]
	w.mu.Unlock()
	if t != nil && t.source != nil {
		t.source.credit.ack(from, seq)
	}
}

// creditKey names an acknowledgement from task from to source task source,
// or with hold set a hold from receiver from on sender source
// (route_hold.go).
type creditKey struct {
	job, source, from string
	hold              bool
}

type creditAck struct {
	key   creditKey
	ref   control.TaskRef
	seq   uint64
	pause bool // a hold: put (else lifted)
}

type sentCredit struct {
	creditAck
	changed time.Time // when seq was first sent
}

// creditReturns holds the newest acknowledgement per (source, receiving
// task) until the returner sends it; later ones replace earlier ones.
type creditReturns struct {
	mu      sync.Mutex
	pending map[creditKey]creditAck
	sent    map[creditKey]sentCredit
	wake    chan struct{}
}

func (c *creditReturns) wakeLocked() chan struct{} {
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	return c.wake
}

func (c *creditReturns) signal() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wakeLocked()
}

// add queues an acknowledgement without blocking.
func (c *creditReturns) add(key creditKey, ref control.TaskRef, seq uint64) {
	c.queue(creditAck{key: key, ref: ref, seq: seq})
}

// addHold queues a hold signal of generation gen without blocking.
func (c *creditReturns) addHold(key creditKey, ref control.TaskRef, gen uint64, pause bool) {
	c.queue(creditAck{key: key, ref: ref, seq: gen, pause: pause})
}

// queue keeps a unless a newer one of its key waits already.
func (c *creditReturns) queue(a creditAck) {
	c.mu.Lock()
	if c.pending == nil {
		c.pending = map[creditKey]creditAck{}
	}
	if p, ok := c.pending[a.key]; !ok || p.seq < a.seq {
		c.pending[a.key] = a
	}
	wake := c.wakeLocked()
	c.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// take empties the queue.
func (c *creditReturns) take() []creditAck {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]creditAck, 0, len(c.pending))
	for _, a := range c.pending {
		out = append(out, a)
	}
	clear(c.pending)
	return out
}

// retry queues a again, without a wake-up: the next tick sends it.
func (c *creditReturns) retry(a creditAck) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[creditKey]creditAck{}
	}
	if p, ok := c.pending[a.key]; !ok || p.seq < a.seq {
		c.pending[a.key] = a
	}
}

// sentOK remembers what was sent, for the resends.
func (c *creditReturns) sentOK(a creditAck, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sent == nil {
		c.sent = map[creditKey]sentCredit{}
	}
	if s, ok := c.sent[a.key]; ok && s.seq >= a.seq {
		return
	}
	c.sent[a.key] = sentCredit{creditAck: a, changed: now}
}

// resendRecent queues again every acknowledgement that changed within
// creditResendFor and forgets the older ones.
func (c *creditReturns) resendRecent(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.sent {
		if now.Sub(s.changed) > creditResendFor {
			delete(c.sent, k)
			continue
		}
		if p, ok := c.pending[k]; !ok || p.seq < s.seq {
			if c.pending == nil {
				c.pending = map[creditKey]creditAck{}
			}
			c.pending[k] = s.creditAck
		}
	}
}

// returnCredits sends queued acknowledgements to the sources' workers
// until ctx ends.
func (w *Worker) returnCredits(ctx context.Context) {
	c := &w.credits
	wake := c.signal()
	tick := time.NewTicker(creditResendEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case now := <-tick.C:
			c.resendRecent(now)
		}
		for _, a := range c.take() {
			f := &wire.Frame{Kind: wire.FrameCredit, JobID: a.key.job, FromTask: a.key.from, ToTask: a.key.source, Seq: a.seq}
			if a.key.hold {
				f.BarrierID = holdRelease
				if a.pause {
					f.BarrierID = holdPause
				}
			}
			sctx, cancel := context.WithTimeout(ctx, creditSendTimeout)
			err := w.peers.Send(sctx, a.ref.DataAddr, f)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				c.retry(a)
				continue
			}
			c.sentOK(a, time.Now())
		}
	}
}
