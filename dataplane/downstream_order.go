package dataplane

import (
	"context"
	"fmt"
	"time"

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
// The downstream operator may be reconfigured at the same time, and the new
// owner may know of a downstream task the old owner did not know of at its
// handoff. The old owner sent that task nothing before its handoff, so
// nothing needs ordering there, but the task still waits for its marker:
// the old owner sends it as soon as it learns of the task
// (markNewDownstreams). An old owner removed before it learns of the task
// never sends it: that task holds the new owner's records for good (a
// downstream scale-out at the same time as an upstream scale-in; see
// EXPERIMENTS.md, "What is left").
//
// A downstream task keeps, per old owner, the latest epoch it saw handed
// off: a marker that arrives before the order it satisfies then releases
// nothing later, and the map stays as small as the operator.

// kltEpochKey names, in a KLT end frame, the operator's routing epoch of
// the handoff (Offset): the new owner orders its output after it.
const kltEpochKey = "epoch"

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
// task sent it before, that it handed buckets off at epoch.
func (t *task) sendHandedOff(ctx context.Context, view *taskView, epoch int64) error {
	return t.sendMarker(ctx, downstreamTasks(view), wire.FrameHandedOff, kltEpochKey, epoch)
}

// sendOrderAfter tells every downstream task that this task's output from
// here on follows oldOwner's handoff at epoch; once per old owner and
// epoch.
func (t *task) sendOrderAfter(ctx context.Context, oldOwner string, epoch int64) error {
	if sent, ok := t.orderedAfter[oldOwner]; ok && sent >= epoch {
		return nil
	}
	if err := t.sendMarker(ctx, downstreamTasks(t.view.Load()), wire.FrameOrderAfter, oldOwner, epoch); err != nil {
		return err
	}
	if t.orderedAfter == nil {
		t.orderedAfter = map[string]int64{}
	}
	t.orderedAfter[oldOwner] = epoch
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

// markNewDownstreams sends the task's latest handoff marker, if it handed
// off, to the downstream tasks after lists and before did not. It runs
// on whichever goroutine installed the view: nothing this task sent those
// tasks came before its handoff, so the marker needs no place in its
// output's order.
func (t *task) markNewDownstreams(before, after *taskView) {
	epoch := t.handedOffAt.Load()
	if epoch == 0 {
		return
	}
	known := map[string]bool{}
	for _, ref := range downstreamTasks(before) {
		known[ref.ID] = true
	}
	var added []control.TaskRef
	for _, ref := range downstreamTasks(after) {
		if !known[ref.ID] {
			added = append(added, ref)
		}
	}
	if len(added) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := t.sendMarker(ctx, added, wire.FrameHandedOff, kltEpochKey, epoch); err != nil {
			t.w.log.Error("handoff marker to a new downstream task", "epoch", epoch, "err", err)
		}
	}()
}
