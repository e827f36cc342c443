package dataplane

import (
	"context"
	"sync/atomic"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// A task's idle and backpressure ratios (metrics.TaskRow.IdleRatio and
// BackpressureRatio) are the fractions of each metrics interval it spent
// waiting: for input (idle) or for a full downstream to take its output
// (backpressure). The autoscaler's true processing rate (records per
// busy second) leaves both out of the busy time, as DS2 does; without
// them a task blocked on its output looks busy and its true rate low.
//
// waitMeter accumulates one kind of wait. The task goroutine brackets
// each wait with begin and end; the metrics loop calls take once per
// interval. A wait still running when take is called is counted up to
// that moment and the rest goes to the next interval, so a task that
// waits through several intervals reports each of them as waited rather
// than one huge wait after it ends.
type waitMeter struct {
	nanos atomic.Int64 // finished waits (and parts of waits) not yet taken
	since atomic.Int64 // unix nanos the running wait began or was last taken at; 0: none
}

// begin marks the start of a wait at now.
func (m *waitMeter) begin(now time.Time) { m.since.Store(now.UnixNano()) }

// end marks the end of the wait begun last, at now.
func (m *waitMeter) end(now time.Time) {
	if s := m.since.Swap(0); s != 0 {
		m.nanos.Add(max(now.UnixNano()-s, 0))
	}
}

// take returns the time waited since the last take, the running wait
// counted up to now.
func (m *waitMeter) take(now time.Time) time.Duration {
	n := now.UnixNano()
	// Move the running wait's start to now; if the task ended it
	// meanwhile (the swap to 0 won), its end added the whole wait.
	if s := m.since.Load(); s != 0 && s < n && m.since.CompareAndSwap(s, n) {
		m.nanos.Add(n - s)
	}
	return time.Duration(m.nanos.Swap(0))
}

// waitRatio is waited over the interval's length, within 0..1 (0 for an
// interval of no length).
func waitRatio(waited, interval time.Duration) float64 {
	if interval <= 0 {
		return 0
	}
	return min(max(waited.Seconds()/interval.Seconds(), 0), 1)
}

// nextFrame takes the task's next frame. A frame already queued is taken
// without reading the clock; only an empty inbox starts a wait for input,
// timed as idle. ok is false when tick or ready fired (or ctx ended)
// first.
func (t *task) nextFrame(ctx context.Context, tick <-chan time.Time, ready <-chan struct{}) (f *wire.Frame, ok bool) {
	select {
	case f = <-t.inbox:
		return t.taken(f), true
	default:
	}
	t.stats.idle.begin(time.Now())
	defer func() { t.stats.idle.end(time.Now()) }()
	select {
	case <-ctx.Done():
		return nil, false
	case f = <-t.inbox:
		return t.taken(f), true
	case <-tick:
		return nil, false
	case <-ready:
		return nil, false
	}
}

// taken returns the inbox room a data frame held (deliverLocal).
func (t *task) taken(f *wire.Frame) *wire.Frame {
	if f.Kind == wire.FrameData && t.inboxRecs != nil {
		t.inboxRecs.Release(len(f.Records))
	}
	return f
}

// sendTimed is send, timed as backpressure when o.blocked is set: a send
// returns at once unless the target's queue is full or the target holds
// this task (route_hold.go), so its time is the wait for the downstream.
func (o *outputs) sendTimed(ctx context.Context, w *Worker, target control.TaskRef, f *wire.Frame) error {
	if o.blocked == nil {
		return o.send(ctx, w, target, f)
	}
	o.blocked.begin(time.Now())
	defer func() { o.blocked.end(time.Now()) }()
	return o.send(ctx, w, target, f)
}
