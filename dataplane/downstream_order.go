package dataplane

import (
	"context"
	"fmt"
	"slices"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// Order downstream of a handoff.
//
// route_drain.go keeps the order of what a rescaled operator takes in; its
// output needs the same care. An old owner O processes record r1 of key k
// and sends its output o1 to a downstream task D, then gives k's bucket to
// a new owner N, which processes k's next record r2 and sends o2 to D. o1
// and o2 travel on different lanes (O→D and N→D, exchange/peers.go), and o1
// can still be queued behind a busy lane when o2 arrives, so D would take
// o2 first. Where the operator keys its output anew — twitch's per-user
// sessions send per-stream joins and leaves — a user's leave then
// overtakes the join it closes.
//
// So O tells every downstream task, behind everything it sent before its
// handoff, that it handed off at its operator's routing epoch e
// (FrameHandedOff), and N, before it takes a record of any bucket gained
// from O, tells every downstream task that what it sends from then on
// comes after O's handoff at e (FrameOrderAfter). A downstream task holds
// N's later frames, of every kind and in N's order, in the held area the
// route gates use (with its bound and sender holds, route_hold.go), until
// O's marker is in. Both markers travel in lane order behind the records
// before them, and O's is sent before N can hold any bucket of O's (N
// waits for O's handoff end), so the hold ends once O's lane to D has
// delivered what was queued before the marker.
//
// The downstream operator may be reconfigured at the same time, so the
// two owners may know different downstream tasks. O's KLT end lists the
// tasks O marked; N orders its output only at those. A task O did not know
// at its handoff had nothing from O before it, so it has nothing to wait
// for (and O, removed by a scale-in, might never tell it anything). A task
// O marked that N learns of only later gets N's marker before anything else
// N sends it: every send to a downstream task starts on N's task goroutine,
// which checks for such tasks with the view it sends by (orderPending).
//
// A downstream task keeps, per old owner, the latest epoch it saw handed
// off: a marker that arrives before the order it satisfies then releases
// nothing later, and the map stays as small as the operator.

// kltEpochKey names, in a KLT end frame, the operator's routing epoch of
// the handoff (Offset): the new owner orders its output after it.
const kltEpochKey = "epoch"

// kltMarkedKey names, in a KLT end frame, one downstream task (Value) the
// old owner sent its handoff marker to; one record per task.
const kltMarkedKey = "marked"

// handoffOrder is what an old owner's KLT end says of the order of the
// handoff: the buckets the new owner gates (none: the handoff is not
// ordered), the old owner's watermark, the routing epoch and the
// downstream tasks that got the old owner's marker. The new owner reads
// these records back with handoffGate.take (route_drain.go).
type handoffOrder struct {
	gate   []int
	wm     int64
	epoch  int64
	marked []string
}

// endRecords appends the order's records to a KLT end's.
func (o handoffOrder) endRecords(recs []Record) []Record {
	if len(o.gate) == 0 {
		return recs
	}
	recs = append(recs, Record{Key: []byte(kltBucketsKey), Value: encodeBuckets(o.gate), Offset: -1},
		Record{Key: []byte(kltWatermarkKey), EventTime: o.wm, Offset: -1},
		Record{Key: []byte(kltEpochKey), Offset: o.epoch})
	for _, id := range o.marked {
		recs = append(recs, Record{Key: []byte(kltMarkedKey), Value: []byte(id), Offset: -1})
	}
	return recs
}

// pendingOrder is a new owner's marker still owed to downstream tasks the
// old owner marked and the new owner does not know yet.
type pendingOrder struct {
	oldOwner string
	epoch    int64
	to       map[string]bool
}

// ensureGates returns the task's gate state, creating it.
func (t *task) ensureGates() *routeGates {
	if t.gates == nil {
		t.gates = &routeGates{from: map[string]*drainGate{}, held: map[string][]*wire.Frame{}, limit: t.holdBytes()}
	}
	return t.gates
}

// downstreamTasks lists every task of every operator view sends to.
func downstreamTasks(view *taskView) []control.TaskRef {
	var out []control.TaskRef
	if view == nil {
		return nil
	}
	for _, rt := range view.routes {
		out = append(out, rt.tasks...)
	}
	return out
}

// sendMarker sends each of refs a kind frame whose one record is key at
// epoch (Offset).
func (t *task) sendMarker(ctx context.Context, refs []control.TaskRef, kind wire.FrameKind, key string, epoch int64) error {
	for _, ref := range refs {
		f := &wire.Frame{Kind: kind, JobID: t.jobID, FromTask: t.id, ToTask: ref.ID,
			Records: []Record{{Key: []byte(key), Offset: epoch}}}
		if err := t.w.deliver(ctx, ref, f); err != nil {
			return fmt.Errorf("task %s: %v marker to downstream %s: %w", t.id, kind, ref.ID, err)
		}
	}
	return nil
}

// sendHandedOff tells every downstream task of view, behind what this
// task sent it before, that it handed buckets off at epoch, and returns
// their IDs.
func (t *task) sendHandedOff(ctx context.Context, view *taskView, epoch int64) ([]string, error) {
	refs := downstreamTasks(view)
	ids := make([]string, len(refs))
	for i, ref := range refs {
		ids[i] = ref.ID
	}
	return ids, t.sendMarker(ctx, refs, wire.FrameHandedOff, kltEpochKey, epoch)
}

// sendOrderAfter tells the downstream tasks oldOwner marked that this
// task's output from here on follows oldOwner's handoff at epoch; once per
// old owner and epoch. Those it does not know yet get it when it learns of
// them (orderPending).
func (t *task) sendOrderAfter(ctx context.Context, oldOwner string, epoch int64, marked []string) error {
	if sent, ok := t.orderedAfter[oldOwner]; ok && sent >= epoch {
		return nil
	}
	if t.orderedAfter == nil {
		t.orderedAfter = map[string]int64{}
	}
	t.orderedAfter[oldOwner] = epoch
	p := pendingOrder{oldOwner: oldOwner, epoch: epoch, to: map[string]bool{}}
	for _, id := range marked {
		p.to[id] = true
	}
	// A newer handoff of the same old owner supersedes what is owed for an
	// older one: the downstream task's latest-epoch check covers both.
	t.pendingOrders = slices.DeleteFunc(t.pendingOrders, func(q pendingOrder) bool { return q.oldOwner == oldOwner })
	t.pendingOrders = append(t.pendingOrders, p)
	t.pendingSeen = nil
	return t.orderPending(ctx, t.view.Load())
}

// orderPending sends the markers owed to downstream tasks of view. It runs
// on the task goroutine before anything is sent by view. A view is
// immutable, so one already looked at owes nothing more: a marker owed to
// a task that never shows up (removed before this task learnt of it) costs
// a pointer comparison per frame, not a walk of the routes.
func (t *task) orderPending(ctx context.Context, view *taskView) error {
	if len(t.pendingOrders) == 0 || view == t.pendingSeen {
		return nil
	}
	t.pendingSeen = view
	refs := downstreamTasks(view)
	kept := t.pendingOrders[:0]
	for _, p := range t.pendingOrders {
		var now []control.TaskRef
		for _, ref := range refs {
			if p.to[ref.ID] {
				now = append(now, ref)
				delete(p.to, ref.ID)
			}
		}
		if err := t.sendMarker(ctx, now, wire.FrameOrderAfter, p.oldOwner, p.epoch); err != nil {
			return err
		}
		if len(p.to) > 0 {
			kept = append(kept, p)
		}
	}
	clear(t.pendingOrders[len(kept):])
	t.pendingOrders = kept
	return nil
}

// waitsAfter reports whether sender's frames wait for an old owner's
// handoff marker.
func (g *routeGates) waitsAfter(sender string) bool {
	return len(g.after[sender]) > 0
}

// onOrderAfter starts holding the sender's later frames until each named
// old owner's handoff marker is in.
func (t *task) onOrderAfter(f *wire.Frame) {
	g := t.ensureGates()
	for _, r := range f.Records {
		old, epoch := string(r.Key), r.Offset
		if seen, ok := g.handed[old]; ok && seen >= epoch {
			continue
		}
		if g.after == nil {
			g.after = map[string]map[string]int64{}
		}
		if g.after[f.FromTask] == nil {
			g.after[f.FromTask] = map[string]int64{}
		}
		g.after[f.FromTask][old] = max(g.after[f.FromTask][old], epoch)
	}
}

// onHandedOff takes an old owner's handoff marker and processes the frames
// it releases.
func (t *task) onHandedOff(ctx context.Context, f *wire.Frame) error {
	if len(f.Records) == 0 {
		return fmt.Errorf("task %s: handoff marker from %s names no epoch", t.id, f.FromTask)
	}
	g := t.ensureGates()
	epoch := f.Records[0].Offset
	if g.handed == nil {
		g.handed = map[string]int64{}
	}
	if seen, ok := g.handed[f.FromTask]; ok && seen >= epoch {
		return nil
	}
	g.handed[f.FromTask] = epoch
	released := false
	for sender, waits := range g.after {
		if want, ok := waits[f.FromTask]; ok && want <= epoch {
			delete(waits, f.FromTask)
		}
		if len(waits) == 0 {
			delete(g.after, sender)
			released = true
		}
	}
	if !released {
		return nil
	}
	return t.releaseHeld(ctx)
}
