package dataplane

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// Per-key order across a lazy handoff.
//
// An upstream task U may send record r1 of key k to the old owner O with
// the old routing, switch routing, and send r2 of k straight to the new
// owner N. O forwards r1 to N, so r2 can reach N first. To keep the order,
// N holds records that arrive directly from U for the buckets it gained
// from O until O says, in its forwarded stream to N and so after every
// record of U it forwarded, that it has seen U's route barrier: nothing U
// routed with the old table can follow. Once O has seen the barrier of
// every listed sender it says so too ("*"), which also releases senders
// no barrier named (tasks that never routed with the old table).
//
// A held sender keeps its order for everything it sends later, barriers
// and watermarks included, so no barrier overtakes held records. A
// sender's watermark is held even when none of its records is: until the
// old owner says the sender is drained, records the sender routed there
// earlier may still come forwarded, and a watermark that overtook them
// would fire their windows without them (and make them late).

// drainAll in a route-drained frame means every listed sender is drained.
const drainAll = "*"

// kltBucketsKey marks the KLT end record listing the buckets handed over;
// kltWatermarkKey the one whose EventTime is the old owner's watermark at
// the handoff.
const (
	kltBucketsKey   = "buckets"
	kltWatermarkKey = "watermark"
)

// encodeBuckets writes buckets as a comma-separated list.
func encodeBuckets(buckets []int) []byte {
	parts := make([]string, len(buckets))
	for i, b := range buckets {
		parts[i] = strconv.Itoa(b)
	}
	return []byte(strings.Join(parts, ","))
}

func decodeBuckets(v []byte) (map[int]bool, error) {
	out := map[int]bool{}
	if len(v) == 0 {
		return out, nil
	}
	for _, p := range strings.Split(string(v), ",") {
		b, err := strconv.Atoi(p)
		if err != nil || b < 0 {
			return nil, fmt.Errorf("bad bucket %q in a KLT end list (want non-negative integers)", p)
		}
		out[b] = true
	}
	return out, nil
}

// drainGate is what a new owner holds back for one old owner.
type drainGate struct {
	buckets map[int]bool
	drained map[string]bool // upstream senders O has seen the barrier of
	// wm is O's watermark at the handoff (wmSet): records O forwards are
	// judged late by it, not by this task's watermark (LateBounder).
	wm    int64
	wmSet bool
}

// routeGates is a new owner's state; owned by the task goroutine.
//
// Held frames stay in memory: the task has one inbox for all senders, so
// it cannot stop reading one sender without also stopping the old owner's
// marker. Past limit bytes it holds the senders instead (route_hold.go).
type routeGates struct {
	from  map[string]*drainGate    // old owner → gate
	held  map[string][]*wire.Frame // sender → frames held, in arrival order
	n     int                      // records held
	bytes int                      // their recordsBytes
	limit int                      // ReconfigHoldMaxBytes
	// paused: the senders this task holds (route_hold.go).
	paused map[string]control.TaskRef
	// after: sender → old owner → epoch of the handoff marker the
	// sender's frames wait for; handed: old owner → latest epoch it
	// handed off at (downstream_order.go).
	after  map[string]map[string]int64
	handed map[string]int64
}

// openGate starts holding direct records for buckets gained from oldOwner.
// A gate already open for oldOwner (opened when the task learnt its new
// buckets, see openGainedGates) gains the buckets and keeps what it knows
// of drained senders.
func (t *task) openGate(oldOwner string, buckets map[int]bool) {
	if len(buckets) == 0 {
		return
	}
	t.ensureGates()
	if g := t.gates.from[oldOwner]; g != nil {
		for b := range buckets {
			g.buckets[b] = true
		}
		return
	}
	t.gates.from[oldOwner] = &drainGate{buckets: buckets, drained: map[string]bool{}}
}

// setGateWatermark records the old owner's watermark at its handoff.
func (t *task) setGateWatermark(oldOwner string, wm int64) {
	if t.gates == nil {
		return
	}
	if g := t.gates.from[oldOwner]; g != nil {
		g.wm, g.wmSet = wm, true
	}
}

// forwardedLateBound returns the late bound for a data frame f: the old
// owner's watermark at its handoff when f comes forwarded from an old
// owner whose gate is still open.
func (t *task) forwardedLateBound(f *wire.Frame) (int64, bool) {
	if t.gates == nil {
		return 0, false
	}
	g := t.gates.from[f.FromTask]
	if g == nil || !g.wmSet {
		return 0, false
	}
	return g.wm, true
}

// handoffGate is what a KLT end says of the gate for the buckets handed
// over: which buckets, the old owner's watermark and the routing epoch.
type handoffGate struct {
	buckets map[int]bool // nil: the handoff is not ordered
	wm      int64
	wmSet   bool
	epoch   int64
	// marked: the downstream tasks the old owner sent its marker to.
	marked []string
}

// take reads r into g when it is one of the gate's records and reports
// whether it was.
func (g *handoffGate) take(r *Record) (bool, error) {
	switch string(r.Key) {
	case kltBucketsKey:
		buckets, err := decodeBuckets(r.Value)
		if err != nil {
			return true, err
		}
		g.buckets = buckets
	case kltWatermarkKey:
		g.wm, g.wmSet = r.EventTime, true
	case kltEpochKey:
		g.epoch = r.Offset
	case kltMarkedKey:
		g.marked = append(g.marked, string(r.Value))
	default:
		return false, nil
	}
	return true, nil
}

// openHandoffGate opens the gate a KLT end from oldOwner names and orders
// this task's output after oldOwner's handoff, before any record of those
// buckets: direct ones wait at the gate for the old owner's route-drained
// marker, forwarded ones come after the KLT end (downstream_order.go).
func (t *task) openHandoffGate(ctx context.Context, oldOwner string, g handoffGate) error {
	if g.buckets == nil {
		return nil
	}
	t.openGate(oldOwner, g.buckets)
	if g.wmSet {
		t.setGateWatermark(oldOwner, g.wm)
	}
	return t.sendOrderAfter(ctx, oldOwner, g.epoch, g.marked)
}

// openGainedGates installs dep and opens a gate for every other task of
// the operator that gives this task buckets in it, on the task goroutine:
// from here on, upstream watermarks and direct records of those buckets
// wait behind that old owner's route-drained marker. Opening only when the
// old owner's handoff ends would be too late for a task that already runs:
// an upstream may send the old owner a record, then this task a watermark
// past it, and the old owner forwards the record after the watermark.
func (t *task) openGainedGates(dep control.Deployment) {
	old, next := t.mergeView(dep)
	if old.self == nil || next.self == nil {
		return
	}
	gained := map[string]map[int]bool{}
	for b := 0; b < len(next.self.table.Buckets); b++ {
		if next.self.owner(b).ID != t.id {
			continue
		}
		if from := old.self.owner(b).ID; from != t.id && from != "" {
			if gained[from] == nil {
				gained[from] = map[int]bool{}
			}
			gained[from][b] = true
		}
	}
	for from, buckets := range gained {
		t.openGate(from, buckets)
	}
}

// gateable reports whether f comes straight from an upstream task and is
// subject to the gates: frames of the task's own operator (forwarded
// records, lookup entries, markers) never are.
func (t *task) gateable(view *taskView, f *wire.Frame) bool {
	if t.gates == nil || (len(t.gates.from) == 0 && len(t.gates.held) == 0 && len(t.gates.after) == 0) {
		return false
	}
	switch f.Kind {
	case wire.FrameData, wire.FrameBarrier, wire.FrameEOS, wire.FrameWatermark, wire.FrameHandedOff, wire.FrameOrderAfter:
	default:
		return false
	}
	if _, peer := t.gates.from[f.FromTask]; peer {
		return false
	}
	if view.self != nil {
		if _, peer := view.self.byID[f.FromTask]; peer {
			return false
		}
	}
	return true
}

// held reports whether a record of bucket b from sender must wait.
func (g *routeGates) holds(b int, sender string) bool {
	for _, gate := range g.from {
		if gate.buckets[b] && !gate.drained[sender] {
			return true
		}
	}
	return false
}

// undrained reports whether some old owner has not yet said that sender's
// records routed the old way are all forwarded.
func (g *routeGates) undrained(sender string) bool {
	for _, gate := range g.from {
		if !gate.drained[sender] {
			return true
		}
	}
	return false
}

// admit returns the part of f to process now (nil: nothing) and holds the
// rest behind the sender's earlier held frames.
func (t *task) admit(view *taskView, f *wire.Frame) *wire.Frame {
	g := t.gates
	s := f.FromTask
	if len(g.held[s]) > 0 || g.waitsAfter(s) {
		t.holdFrame(view, s, f)
		return nil
	}
	if f.Kind == wire.FrameWatermark && g.undrained(s) {
		t.holdFrame(view, s, f)
		return nil
	}
	if f.Kind != wire.FrameData || view.self == nil {
		return f
	}
	var now, later []Record
	for _, r := range f.Records {
		if g.holds(statesvc.BucketOf(r.Key, view.self.buckets), s) {
			later = append(later, r)
		} else {
			now = append(now, r)
		}
	}
	if len(later) == 0 {
		return f
	}
	h := *f
	h.Records = later
	t.holdFrame(view, s, &h)
	if len(now) == 0 {
		return nil
	}
	p := *f
	p.Records = now
	p.Seq = 0 // the held part acknowledges the source's frame once processed
	return &p
}

// onRouteDrained takes an old owner's marker and processes what it
// releases. A marker seen again, or from an old owner whose gate is gone,
// changes nothing.
func (t *task) onRouteDrained(ctx context.Context, f *wire.Frame) error {
	if t.gates == nil {
		return nil
	}
	gate := t.gates.from[f.FromTask]
	if gate == nil {
		return nil
	}
	for _, r := range f.Records {
		if string(r.Key) == drainAll {
			// Records it forwarded that joined windows already due here
			// (taken under its watermark) were indexed as they were
			// processed: those windows fire at the next watermark.
			delete(t.gates.from, f.FromTask)
			break
		}
		gate.drained[string(r.Key)] = true
	}
	return t.releaseHeld(ctx)
}

// releaseHeld re-admits every held frame in its sender's order.
func (t *task) releaseHeld(ctx context.Context) error {
	g := t.gates
	senders := make([]string, 0, len(g.held))
	for s := range g.held {
		senders = append(senders, s)
	}
	sort.Strings(senders)
	for _, s := range senders {
		frames := g.held[s]
		delete(g.held, s)
		for _, f := range frames {
			g.n -= len(f.Records)
			g.bytes -= recordsBytes(f.Records)
		}
		for _, f := range frames {
			view := t.view.Load()
			if p := t.admit(view, f); p != nil {
				if err := t.dispatch(ctx, view, p); err != nil {
					return err
				}
			}
		}
	}
	t.releaseSenders(false)
	return nil
}

// drainTargets are the new owners an old owner forwards to in a lazy
// handoff; they get its route-drained markers. Owned by the task goroutine.
type drainTargets []control.TaskRef

// sendRouteDrained tells every new owner, behind the records already
// forwarded to it, that sender's records routed with the old table are all
// forwarded; with all set, that every listed sender's are.
func (t *task) sendRouteDrained(ctx context.Context, barrierID, sender string, all bool) error {
	if len(t.drainTo) == 0 {
		return nil
	}
	recs := []Record{{Key: []byte(sender), Offset: -1}}
	if all {
		recs = append(recs, Record{Key: []byte(drainAll), Offset: -1})
	}
	for _, target := range t.drainTo {
		f := &wire.Frame{Kind: wire.FrameRouteDrained, JobID: t.jobID, FromTask: t.id, ToTask: target.ID, BarrierID: barrierID, Records: recs}
		if err := t.out.send(ctx, t.w, target, f); err != nil {
			return err
		}
	}
	if all {
		t.drainTo = nil
	}
	return nil
}

// send delivers one frame to target behind the frames already sent or
// waiting in target's handoff queue; records wait while target holds this
// task (route_hold.go).
func (o *outputs) send(ctx context.Context, w *Worker, target control.TaskRef, f *wire.Frame) error {
	if q := o.diverted[target.ID]; q != nil {
		queued, err := q.offer(ctx, f)
		if err != nil || queued {
			return err
		}
		delete(o.diverted, target.ID)
	}
	if f.Kind == wire.FrameData {
		if err := w.awaitSend(ctx, o.jobID, o.taskID, target.ID); err != nil {
			return err
		}
	}
	return w.deliver(ctx, target, f)
}
