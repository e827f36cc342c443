package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// kltChunk bounds the entries per KLT frame so frames stay well under the
// gRPC message limit.
const kltChunk = 4096

// handoff is the lazy protocol's fast-forward on an old owner. On the
// task's goroutine it only installs the new deployment — from then on
// records of the buckets it gave away are forwarded, never written here —
// and takes the lookup entries it holds for those buckets. Scanning the
// local keys and sending them to each new owner runs in the background so
// the task keeps processing its other buckets; records it forwards to a new
// owner meanwhile wait behind that owner's lookup entries, which keeps the
// order "entries, then KLT end, then forwarded records" the new owner needs.
//
// An eager handoff (stop-and-restart, DRRS) is ordered only when asked:
// DRRS swaps routes in band while old owners still forward, so its new
// owners need the same gate as a lazy one's.
//
// A task without keyed state hands over no entries, only the order: its
// new owners gate the buckets they gain until it has processed, and sent
// downstream, every record routed to it the old way (a stateless keyed
// operator's rescale keeps per-key order this way).
//
// Only the task's own operator decides whether the handoff is new: a
// retried handoff finds its operator's epoch already installed and does
// nothing, while routing changes of other operators (reconfigured at the
// same time) neither block nor get undone by it.
func (t *task) handoff(ctx context.Context, dep control.Deployment, reconfigID string, eager, ordered bool) error {
	if dep.OperatorEpoch(t.opName) <= t.view.Load().dep.OperatorEpoch(t.opName) {
		t.w.log.Debug("handoff already applied", "task", t.id, "operator", t.opName, "epoch", dep.OperatorEpoch(t.opName))
		return nil // a retried handoff: already done
	}
	if _, ok := dep.Table(t.opName); !ok {
		return fmt.Errorf("handoff on %s: operator %s has no routing table", t.id, t.opName)
	}
	old, next := t.mergeView(dep)
	if old.self == nil || next.self == nil {
		return fmt.Errorf("handoff on %s: operator %s has no routing table", t.id, t.opName)
	}
	gained := map[string][]int{} // new owner → buckets
	var order []string
	for b := 0; b < len(old.self.table.Buckets); b++ {
		if old.self.owner(b).ID != t.id {
			continue
		}
		if to := next.self.owner(b); to.ID != t.id {
			if _, ok := gained[to.ID]; !ok {
				order = append(order, to.ID)
			}
			gained[to.ID] = append(gained[to.ID], b)
		}
	}
	me := control.TaskRef{}
	for _, ref := range old.self.tasks {
		if ref.ID == t.id {
			me = ref
		}
	}
	_, stillHere := next.self.byID[t.id]
	// Where upstreams swap routes behind a route barrier (lazy, DRRS), new
	// owners hold direct records until this task's forwarded stream is
	// drained (route_drain.go).
	ordered = ordered || !eager
	epoch := dep.OperatorEpoch(t.opName)
	var marked []string
	if ordered {
		// Downstream tasks take what this task sent before ahead of what
		// the new owners send (downstream_order.go).
		var err error
		if marked, err = t.sendHandedOff(ctx, next, epoch); err != nil {
			return fmt.Errorf("handoff on %s: %w", t.id, err)
		}
	}
	bulk := eager // asked for by stop-and-restart or DRRS, not a lazy scale-in
	eager = eager || !stillHere
	// A bulk move pushes the state itself (handoff_push.go).
	push := bulk && t.keyed != nil && !t.keyed.shared
	t.w.log.Debug("handoff", "task", t.id, "reconfig", reconfigID, "to", order)
	// The new owners judge what this task forwards by its watermark now
	// (LateBounder): nothing forwarded from here on is behind it.
	wmNow := MinWatermark
	if t.wm.inited {
		wmNow = t.wm.current
	}
	for _, toID := range order {
		var remote []Record
		var timers *handoffTimers
		var indexed [][]uint32
		var indexOK bool
		if t.keyed != nil {
			// The buckets' timers leave with them (timer_sync.go).
			timers = t.takeTimers(gained[toID])
			// Entries pointing at third tasks leave this table now, before
			// any progressive migration here could fetch them; a background
			// chunk in flight ends first (migrator.go), so none of these
			// buckets' keys is half moved here.
			var err error
			if remote, err = t.keyed.giveAwayEntries(gained[toID]); err != nil {
				return fmt.Errorf("handoff on %s: %w", t.id, err)
			}
			// Here, on the task goroutine: every write to these buckets is
			// in the index, and none comes after.
			indexed, indexOK = t.keyed.localIdx.take(gained[toID], !bulk)
			t.handoffs.sent(reconfigID, toID) // until the new owner acks (handoff_ack.go)
		}
		q := &handoffQueue{limit: t.holdBytes()}
		t.out.divert(toID, q)
		order := handoffOrder{wm: wmNow, epoch: epoch, marked: marked}
		if ordered {
			order.gate = gained[toID]
			t.drainTo = append(t.drainTo, next.self.byID[toID])
		}
		t.handoffSends.Go(func() {
			t.sendHandoff(ctx, next.self.byID[toID], gained[toID], me, remote, handoffKeys{hashes: indexed, ok: indexOK}, timers, reconfigID, eager, bulk, push, order, q)
		})
	}
	return nil
}

// awaitHandoffSends waits, bounded by ctx, until every handoff of the task
// has delivered what it queued for its new owner. A handoff sends on the
// task's context, and its queue can wait for room in a busy new owner's
// inbox well after the task announced its forwarding done: stopping the
// task first would cancel the send and drop the queued records and the
// route-drained marker, so the new owner would lose them and hold that
// sender's records, watermarks and end of stream forever.
func (t *task) awaitHandoffSends(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		t.handoffSends.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("task %s: its handoffs are still delivering to the new owners: %w", t.id, ctx.Err())
	}
}

// sendHandoff streams the lookup entries of buckets to the new owner, then
// the buckets' timers, then the KLT end, then the records forwarded
// meanwhile.
func (t *task) sendHandoff(ctx context.Context, target control.TaskRef, buckets []int, me control.TaskRef, remote []Record, local handoffKeys, timers *handoffTimers, reconfigID string, eager, bulk, push bool, order handoffOrder, q *handoffQueue) {
	err := func() error {
		var entries []Record
		switch {
		case t.keyed == nil:
		case push:
			if _, err := t.pushBuckets(ctx, target, buckets, me, reconfigID); err != nil {
				return err
			}
		default:
			var err error
			if entries, err = t.keyed.localEntries(buckets, me, local); err != nil {
				return err
			}
		}
		entries = append(entries, remote...)
		for start := 0; start < len(entries); start += kltChunk {
			end := min(start+kltChunk, len(entries))
			chunk := entries[start:end]
			f := &wire.Frame{Kind: wire.FrameKLT, JobID: t.jobID, FromTask: t.id, ToTask: target.ID, BarrierID: reconfigID, Records: chunk}
			if err := t.w.deliver(ctx, target, f); err != nil {
				return err
			}
		}
		if timers != nil {
			for start := 0; start < len(timers.records); start += kltChunk {
				f := &wire.Frame{Kind: wire.FrameKLT, JobID: t.jobID, FromTask: t.id, ToTask: target.ID, BarrierID: reconfigID,
					Records: timers.records[start:min(start+kltChunk, len(timers.records))]}
				if err := t.w.deliver(ctx, target, f); err != nil {
					return err
				}
			}
		}
		// The end names this task's address: the new owner acks there.
		end := &wire.Frame{Kind: wire.FrameKLTEnd, JobID: t.jobID, FromTask: t.id, ToTask: target.ID, BarrierID: reconfigID,
			Records: []Record{{Key: []byte(kltFromKey), Value: []byte(encodeOwner(me)), Offset: -1}}}
		if eager {
			end.Records = append(end.Records, Record{Key: []byte("eager"), Offset: -1})
		}
		if bulk {
			end.Records = append(end.Records, Record{Key: []byte("bulk"), Offset: -1})
		}
		end.Records = order.endRecords(end.Records)
		end.Records = append(end.Records, timers.endRecords()...)
		if err := t.w.deliver(ctx, target, end); err != nil {
			return err
		}
		for {
			batch := q.take()
			if len(batch) == 0 {
				return nil
			}
			for _, f := range batch {
				if err := t.w.deliver(ctx, target, f); err != nil {
					return err
				}
			}
		}
	}()
	if err != nil && ctx.Err() == nil {
		t.fail(fmt.Errorf("handoff from %s to %s: %w", t.id, target.ID, err))
	}
}

// handoffKeys is what the local key index had for a handoff's buckets
// (localIndex.take): per bucket the sorted lookup table hashes of the keys
// stored here, or ok false for an incomplete index, when the store is
// listed instead.
type handoffKeys struct {
	hashes [][]uint32
	ok     bool
}

// giveAwayEntries takes the lookup entries of buckets out of the table and
// returns them as KLT frame records (remoteEntries), after any background
// chunk in flight ended; the migrator forgets where it stood in them.
func (ks *keyedState) giveAwayEntries(buckets []int) ([]Record, error) {
	ks.mig.chunkMu.Lock()
	defer ks.mig.chunkMu.Unlock()
	remote, err := ks.remoteEntries(buckets)
	if err != nil {
		return nil, err
	}
	ks.klt.RemoveBuckets(buckets)
	ks.mig.forgetBuckets(buckets)
	return remote, nil
}

// localEntries lists, as KLT frame records (each naming the owner, me),
// the lookup table hashes of every key of buckets whose value is stored
// here (hashesRecord: the new
// owner's table keeps hashes, not keys, so the keys need not travel, and
// it adds each bucket's sorted hashes in one merge instead of one entry
// at a time, which for millions of keys held its task for most of a
// second).
//
// The keys come from the task's key index (local_index.go), kept as it
// writes. An incomplete index lists them from the store instead
// (listEntries): keys only (statesvc.ExportKeys), all buckets in one listing:
// the buckets' buffered writes are read where they are,
// neither written back with the rest of the write-back cache under the
// store's write lock (as a scan would, which held up this task's batches
// for tens of milliseconds) nor copied with their values.
func (ks *keyedState) localEntries(buckets []int, me control.TaskRef, local handoffKeys) ([]Record, error) {
	if ks.shared {
		return nil, nil // the new owner reads the same state service
	}
	byBucket := make([][]uint32, max(1, ks.buckets))
	if local.ok { // from the key index: no listing (local_index.go)
		for i, b := range buckets {
			if b >= 0 && b < len(byBucket) {
				byBucket[b] = local.hashes[i]
			}
		}
	} else if err := ks.listEntries(buckets, byBucket); err != nil {
		return nil, err
	}
	owner := []byte(encodeOwner(me))
	var out []Record
	for b, hs := range byBucket { // sorted per bucket, by the index or the listing
		for start := 0; start < len(hs); start += kltHashesPerRecord {
			out = append(out, hashesRecord(b, hs[start:min(start+kltHashesPerRecord, len(hs))], owner))
		}
	}
	return out, nil
}

// listEntries lists the keys of buckets from the store into byBucket, as
// their lookup table hashes, sorted per bucket: the handoff's way when the key index is
// incomplete (a store restored in a way the index did not see).
func (ks *keyedState) listEntries(buckets []int, byBucket [][]uint32) error {
	// The listing has no order, and a user key has one state key per
	// state name: with several states the same user key shows up once per
	// state. Two keys may share a hash; each still counts (an entry per
	// key), so duplicates are told apart by key, not by hash.
	var seen map[string]bool
	if len(ks.names) > 1 {
		seen = map[string]bool{}
	}
	var ranges []statesvc.KeyRange
	for _, run := range bucketRuns(slices.Compact(slices.Sorted(slices.Values(buckets)))) {
		start, end := statesvc.BucketRange(ks.opName, run[0], run[1])
		ranges = append(ranges, statesvc.KeyRange{Start: start, End: end})
	}
	err := statesvc.ExportKeys(ks.store, ranges, func(k []byte) bool {
		_, _, _, user, err := statesvc.SplitStateKey(k)
		if err != nil {
			return true
		}
		if seen != nil {
			if seen[string(user)] {
				return true
			}
			seen[string(user)] = true
		}
		b, h := statesvc.KLTHash(user, ks.buckets)
		byBucket[b] = append(byBucket[b], h)
		return true
	})
	if err != nil {
		return fmt.Errorf("list the keys of buckets %v: %w", buckets, err)
	}
	for _, hs := range byBucket {
		slices.Sort(hs)
	}
	return nil
}

// remoteEntries lists the entries of this task's own lookup table for
// buckets (keys whose value is still on a third task) as KLT frame records:
// the table keeps key hashes, not keys, so each record carries a run of
// hashes of one (bucket, owner) — see hashesRecord.
func (ks *keyedState) remoteEntries(buckets []int) ([]Record, error) {
	var out []Record
	for _, s := range ks.klt.Segments(buckets) {
		ref, ok := ks.owners.Load(s.Owner)
		if !ok {
			return nil, fmt.Errorf("key lookup table names owner %q with no known address", s.Owner)
		}
		owner := []byte(encodeOwner(ref.(control.TaskRef)))
		for start := 0; start < len(s.Hashes); start += kltHashesPerRecord {
			out = append(out, hashesRecord(s.Bucket, s.Hashes[start:min(start+kltHashesPerRecord, len(s.Hashes))], owner))
		}
	}
	return out, nil
}

// A KLT frame record with Offset kltHashesOffset carries lookup table
// hashes instead of a key: Partition is the bucket, Key the 32-bit hashes
// (little-endian), Value the owner, as always set on such records.
const (
	kltHashesOffset    = -2
	kltHashesPerRecord = 1 << 11 // 8 KiB: a frame of kltChunk records stays under the message limit
)

func hashesRecord(bucket int, hashes []uint32, owner []byte) Record {
	key := make([]byte, 0, 4*len(hashes))
	for _, h := range hashes {
		key = binary.LittleEndian.AppendUint32(key, h)
	}
	return Record{Key: key, Value: owner, Partition: int32(bucket), Offset: kltHashesOffset}
}

// installHashes adds the hashes of hashesRecords of one bucket for owner.
func (ks *keyedState) installHashes(rs []Record, owner string) error {
	n := 0
	for i := range rs {
		if len(rs[i].Key)%4 != 0 {
			return fmt.Errorf("KLT hashes record of %d bytes, want a multiple of 4", len(rs[i].Key))
		}
		n += len(rs[i].Key) / 4
	}
	hs := make([]uint32, 0, n)
	for i := range rs {
		for k := rs[i].Key; len(k) > 0; k = k[4:] {
			hs = append(hs, binary.LittleEndian.Uint32(k))
		}
	}
	return ks.klt.AddSegment(statesvc.Segment{Bucket: int(rs[0].Partition), Owner: owner, Hashes: hs})
}

func encodeOwner(r control.TaskRef) string {
	return r.ID + "\x00" + r.WorkerID + "\x00" + r.DataAddr
}

func decodeOwner(s []byte) (control.TaskRef, error) {
	parts := strings.Split(string(s), "\x00")
	if len(parts) != 3 || parts[0] == "" {
		return control.TaskRef{}, fmt.Errorf("bad owner reference %q", s)
	}
	return control.TaskRef{ID: parts[0], WorkerID: parts[1], DataAddr: parts[2]}, nil
}

// installKLT takes lookup entries handed over by an old owner.
func (t *task) installKLT(f *wire.Frame) error {
	if t.keyed == nil {
		return fmt.Errorf("task %s: KLT frame from %s, but the operator keeps no keyed state", t.id, f.FromTask)
	}
	ks := t.keyed
	var ref control.TaskRef
	for i := 0; i < len(f.Records); i++ {
		r := &f.Records[i]
		if r.Offset == kltTimerOffset {
			t.installTimer(r) // timer frames carry nothing else (sendHandoff)
			continue
		}
		if len(r.Value) > 0 || i == 0 {
			var err error
			if ref, err = decodeOwner(r.Value); err != nil {
				return fmt.Errorf("task %s: KLT entry from %s: %w", t.id, f.FromTask, err)
			}
			ks.owners.Store(ref.ID, ref)
		}
		if ref.ID == t.id {
			continue // the value is already here
		}
		if r.Offset == kltStateOffset {
			if err := ks.applyPushed(r, f.FromTask); err != nil {
				return fmt.Errorf("task %s: %w", t.id, err)
			}
			continue
		}
		if r.Offset == kltHashesOffset {
			if len(r.Value) == 0 {
				return fmt.Errorf("task %s: KLT hashes record from %s names no owner", t.id, f.FromTask)
			}
			// A bucket's run of records (of one owner) goes in as one
			// segment: one merge into the table.
			j := i + 1
			for j < len(f.Records) && f.Records[j].Offset == kltHashesOffset && f.Records[j].Partition == r.Partition && string(f.Records[j].Value) == string(r.Value) {
				j++
			}
			if err := ks.installHashes(f.Records[i:j], ref.ID); err != nil {
				return fmt.Errorf("task %s: KLT entry from %s: %w", t.id, f.FromTask, err)
			}
			i = j - 1
			continue
		}
		return fmt.Errorf("task %s: KLT record from %s with offset %d: want lookup hashes (%d), pushed state (%d) or a timer (%d)", t.id, f.FromTask, r.Offset, kltHashesOffset, kltStateOffset, kltTimerOffset)
	}
	return nil
}

func (t *task) endKLT(ctx context.Context, f *wire.Frame) error {
	if t.keyed == nil {
		return t.endOrderOnlyHandoff(ctx, f)
	}
	var from control.TaskRef
	var gate handoffGate
	for _, r := range f.Records {
		if ok, err := gate.take(&r); ok {
			if err != nil {
				return fmt.Errorf("task %s: KLT end from %s: %w", t.id, f.FromTask, err)
			}
			continue
		}
		switch string(r.Key) {
		case kltFromKey:
			ref, err := decodeOwner(r.Value)
			if err != nil {
				return fmt.Errorf("task %s: KLT end from %s: %w", t.id, f.FromTask, err)
			}
			from = ref
		case "eager":
			t.keyed.eager = true
		case "bulk":
			t.keyed.bulk = true
		case kltTimersKey, kltUntimedKey:
			if err := t.coverTimers(&r, string(r.Key) == kltTimersKey); err != nil {
				return fmt.Errorf("task %s: KLT end from %s: %w", t.id, f.FromTask, err)
			}
		}
	}
	if err := t.openHandoffGate(ctx, f.FromTask, gate); err != nil {
		return err
	}
	t.keyed.setPending(f.BarrierID)
	t.keyed.installed.Store(f.BarrierID+"/"+f.FromTask, true)
	t.w.log.Debug("klt installed", "task", t.id, "from", f.FromTask, "reconfig", f.BarrierID, "entries", t.keyed.klt.Len())
	t.w.announceProgress(control.MigrationProgress{JobID: t.jobID, ReconfigID: f.BarrierID, TaskID: t.id, Operator: t.opName, Event: control.EventKLTInstalled, From: f.FromTask, Remaining: t.keyed.klt.Len()})
	t.ackKLT(ctx, from, f.BarrierID) // handoff_ack.go
	if t.keyed.bulk {
		// A bulk move starts (or, pushed, ends) now, not at the next idle
		// tick.
		return t.afterBatch(ctx)
	}
	return nil
}

// endOrderOnlyHandoff takes the end of a handoff to a task without keyed
// state: nothing to install, only the gate to open (see handoff).
func (t *task) endOrderOnlyHandoff(ctx context.Context, f *wire.Frame) error {
	var gate handoffGate
	for _, r := range f.Records {
		if _, err := gate.take(&r); err != nil {
			return fmt.Errorf("task %s: KLT end from %s: %w", t.id, f.FromTask, err)
		}
	}
	if err := t.openHandoffGate(ctx, f.FromTask, gate); err != nil {
		return err
	}
	t.orderHandoffs.Store(f.BarrierID+"/"+f.FromTask, true)
	t.w.announceProgress(control.MigrationProgress{JobID: t.jobID, ReconfigID: f.BarrierID, TaskID: t.id, Operator: t.opName, Event: control.EventKLTInstalled, From: f.FromTask})
	return nil
}

// applyRouting installs dep between batches and, for an in-band update,
// sends a route barrier: to the listed targets, or else to every task of
// barrierOp in the previous routing, so old owners learn when no record
// routed with the old table can still arrive.
func (t *task) applyRouting(ctx context.Context, req control.RoutingRequest) error {
	old, _ := t.mergeView(req.Deployment)
	if req.BarrierID == "" {
		return nil
	}
	targets := req.BarrierTargets
	if len(targets) == 0 {
		for _, rt := range old.routes {
			if rt.op.Name == req.BarrierOperator {
				targets = rt.tasks
			}
		}
	}
	// The senders travel with the barrier, one record each, so the
	// receiver knows whom to wait for.
	var senders []Record
	for _, id := range req.BarrierSenders {
		senders = append(senders, Record{Key: []byte(id), Offset: -1})
	}
	for _, target := range targets {
		f := &wire.Frame{Kind: wire.FrameRouteBarrier, JobID: t.jobID, FromTask: t.id, ToTask: target.ID, BarrierID: req.BarrierID, Records: senders}
		if err := t.w.deliver(ctx, target, f); err != nil {
			return err
		}
	}
	return nil
}

// onRouteBarrier aligns a route barrier; once every sender sent it, no
// record routed with the old table can still arrive here. A barrier that
// names its senders is aligned over them; one that does not, over the
// upstream tasks of the view.
func (t *task) onRouteBarrier(ctx context.Context, view *taskView, f *wire.Frame) error {
	// Everything f's sender routed here with the old table is processed
	// and, where forwarded, queued ahead of this marker.
	if err := t.sendRouteDrained(ctx, f.BarrierID, f.FromTask, false); err != nil {
		return err
	}
	if len(f.Records) > 0 {
		senders := make([]string, 0, len(f.Records))
		for _, r := range f.Records {
			senders = append(senders, string(r.Key))
		}
		view = &taskView{upstreams: senders}
	}
	if !t.align(view, f) {
		return nil
	}
	if err := t.sendRouteDrained(ctx, f.BarrierID, f.FromTask, true); err != nil {
		return err
	}
	t.routeDone.Store(f.BarrierID, true)
	t.w.announceProgress(control.MigrationProgress{JobID: t.jobID, ReconfigID: f.BarrierID, TaskID: t.id, Operator: t.opName, Event: control.EventForwardingDone})
	return nil
}
