package dataplane

import (
	"context"
	"fmt"

	"koala/dataplane/control"
	"koala/statesvc"
)

// Timer indexes across reconfigurations.
//
// A timer-driven operator (windows, windowed joins, auction closing) finds
// its due keys in an in-memory TimerIndex derived from its state. The index
// used to be rebuilt from scratch whenever the task's view changed — any
// operator's routing epoch — and whenever a key had arrived by migration:
// every remaining key still on an old owner was pulled first (any of them
// might hold a due window, and only its value says so), then every owned
// bucket was scanned. A lazy rescale of a window operator thus turned into
// an eager one at its first watermark, and every on-demand fetch cost a
// scan of the whole owned state at the next watermark.
//
// Now the index is kept up to date bucket by bucket (timerSync.covered: the
// buckets whose every timer, of local keys and of keys still remote, is in
// the index):
//
//   - an old owner takes the timers of the buckets it hands over out of its
//     index and sends them with the buckets' lookup entries, naming the
//     buckets whose timers were complete (handoffTimers); the new owner adds
//     them to its index, and those buckets are covered without reading a
//     value (installTimer, coverTimers);
//   - at a watermark, the task compares the buckets it owns with those
//     covered only when its own operator's routing epoch changed (another
//     operator's reconfiguration changes nothing here) or a handoff left a
//     bucket uncovered; an owned bucket that is not covered — the first
//     watermark of a task, a bucket whose old owner could not vouch for its
//     timers (an operator that keeps no TimerIndexOwner, an old owner that
//     had not indexed the bucket itself) — has its remote keys pulled and
//     its local keys scanned, once (syncTimers);
//   - a key still remote whose timer is due is fetched at that watermark,
//     with the other due keys of its owner and nothing else (fetchDue), and
//     fires there as it would have on its old owner.
//
// Firing the windows of a key only when its value arrives would emit them
// after the watermark that made them due had gone downstream, where they
// would be late; holding the watermark until the background migration is
// done would hold back every other window. Fetching exactly the due keys
// at the watermark keeps each window's firing where it is without a
// reconfiguration: at the first watermark past its end, once, with all its
// state. Firing is driven by state (OnWatermark fires what the value says
// is due and removes it), so a timer indexed twice or left behind for a
// key that moved away fires nothing twice.

// TimerIndexOwner is implemented by operators that keep their timers in a
// TimerIndex (StateTimers operators outside this package may implement it
// too), adding a timer for everything ProcessKeyed and OnWatermark leave
// pending, as they must for timers to fire at all. Their timers then move
// with their keys in a handoff, and a new owner learns a moved key's
// timers without its value; without it, a new owner pulls the remote keys
// of the buckets it gained, and scans them, at its first watermark after
// the handoff.
type TimerIndexOwner interface {
	Timers() *TimerIndex
}

// kltTimerOffset marks a KLT frame record carrying a timer an old owner
// hands over: Key the user key, EventTime the timer's time.
const kltTimerOffset = -4

// KLT end records of a handoff of a timer-driven operator: the buckets
// whose timers came complete (kltTimersKey) and those whose did not
// (kltUntimedKey), as comma-separated lists.
const (
	kltTimersKey  = "timers"
	kltUntimedKey = "untimed"
)

// timerSync is a task's account of its timer index; task goroutine only.
type timerSync struct {
	// covered: buckets whose every timer is in the index, of the keys
	// stored here and of the keys still on old owners alike.
	covered map[int]bool
	synced  bool  // reconciled with a view at least once
	epoch   int64 // the own operator's routing epoch then
	// stale: a handoff uncovered a bucket since.
	stale bool
}

func (s *timerSync) cover(b int) {
	if s.covered == nil {
		s.covered = map[int]bool{}
	}
	s.covered[b] = true
}

// syncTimers brings the index up to the buckets view gives this task.
func (t *task) syncTimers(ctx context.Context, view *taskView, ix stateIndexer) error {
	ks := t.keyed
	s := &t.wm.timers
	epoch := view.dep.OperatorEpoch(t.opName)
	if s.synced && !s.stale && epoch == s.epoch {
		return nil
	}
	var work []int
	for b := range max(1, ks.buckets) {
		switch {
		case view.self != nil && view.self.owner(b).ID != t.id:
			// Gone: its timers left with its handoff, and a timer left
			// behind fires nothing (keyedWatermark skips keys not owned).
			delete(s.covered, b)
		case !s.covered[b]:
			work = append(work, b)
		}
	}
	if len(work) > 0 {
		if err := t.pullTimerBuckets(ctx, work); err != nil {
			return err
		}
		if err := t.indexBuckets(work, ix); err != nil {
			return err
		}
		for _, b := range work {
			s.cover(b)
		}
	}
	s.synced, s.stale, s.epoch = true, false, epoch
	return nil
}

// pullTimerBuckets moves here every key of buckets the lookup table still
// lists: their timers are unknown, and any of them may be due.
func (t *task) pullTimerBuckets(ctx context.Context, buckets []int) error {
	ks := t.keyed
	if ks.klt.Len() == 0 {
		return nil
	}
	want := make(map[int]bool, len(buckets))
	for _, b := range buckets {
		want[b] = true
	}
	ks.mig.chunkMu.Lock()
	defer ks.mig.chunkMu.Unlock()
	for _, h := range ks.klt.Heads() {
		if !want[h.Bucket] {
			continue
		}
		ref, ok := ks.owners.Load(h.Owner)
		if !ok {
			return fmt.Errorf("task %s: key lookup table names owner %q with no known address", t.id, h.Owner)
		}
		for more := true; more; {
			var err error
			if more, err = t.pullBucket(ctx, ref.(control.TaskRef), h.Owner, h.Bucket, ks.pullPage, 0); err != nil {
				return err
			}
		}
		ks.klt.DropSegment(h.Bucket, h.Owner)
		delete(ks.mig.resume, segmentID{bucket: h.Bucket, owner: h.Owner})
	}
	return nil
}

// indexBuckets adds the timers of every value of buckets stored here.
func (t *task) indexBuckets(buckets []int, ix stateIndexer) error {
	ks := t.keyed
	names := ix.indexedStates()
	for _, run := range bucketRuns(buckets) {
		start, end := statesvc.BucketRange(ks.opName, run[0], run[1])
		var parseErr error
		err := ks.store.Scan(start, end, func(k, v []byte) bool {
			_, _, state, user, err := statesvc.ParseStateKey(k)
			if err != nil {
				parseErr = err
				return false
			}
			for _, n := range names {
				if n == state {
					ix.indexValue(state, append([]byte(nil), user...), append([]byte(nil), v...))
				}
			}
			return true
		})
		if err == nil {
			err = parseErr
		}
		if err != nil {
			return fmt.Errorf("task %s: index the timers of buckets %d-%d: %w", t.id, run[0], run[1]-1, err)
		}
	}
	return nil
}

// handoffTimers is what an old owner hands over of its timer index.
type handoffTimers struct {
	records            []Record // kltTimerOffset records
	covered, uncovered []int
}

// takeTimers takes the timers of buckets (handed over to one new owner)
// out of the operator's index, on the task goroutine; nil when the
// operator keeps no timers.
func (t *task) takeTimers(buckets []int) *handoffTimers {
	if _, ok := indexerOf(t.keyed.op); !ok {
		return nil
	}
	s := &t.wm.timers
	owner, hasIndex := t.keyed.op.(TimerIndexOwner)
	out := &handoffTimers{}
	gone := make(map[int]bool, len(buckets))
	for _, b := range buckets {
		gone[b] = true
		if hasIndex && s.covered[b] {
			out.covered = append(out.covered, b)
		} else {
			out.uncovered = append(out.uncovered, b)
		}
		delete(s.covered, b)
	}
	if !hasIndex {
		return out
	}
	nb := t.keyed.buckets
	// Timers of uncovered buckets go too: they are of no use here, and
	// harmless there (the new owner rebuilds those buckets anyway).
	for _, tm := range owner.Timers().take(func(k string) bool { return gone[statesvc.BucketOf([]byte(k), nb)] }) {
		out.records = append(out.records, Record{Key: []byte(tm.key), EventTime: tm.at, Offset: kltTimerOffset})
	}
	return out
}

// endRecords are the KLT end records naming covered and uncovered buckets.
func (h *handoffTimers) endRecords() []Record {
	if h == nil {
		return nil
	}
	return []Record{{Key: []byte(kltTimersKey), Value: encodeBuckets(h.covered), Offset: -1},
		{Key: []byte(kltUntimedKey), Value: encodeBuckets(h.uncovered), Offset: -1}}
}

// installTimer adds a timer handed over by an old owner.
func (t *task) installTimer(r *Record) {
	if o, ok := t.keyed.op.(TimerIndexOwner); ok {
		o.Timers().Add(r.EventTime, r.Key)
	}
}

// coverTimers takes a KLT end's word on the handed-over buckets' timers:
// covered ones need no rebuild here, the others a pull and a scan at the
// next watermark.
func (t *task) coverTimers(r *Record, covered bool) error {
	buckets, err := decodeBuckets(r.Value)
	if err != nil {
		return err
	}
	s := &t.wm.timers
	for b := range buckets {
		if covered {
			s.cover(b)
			continue
		}
		delete(s.covered, b)
		s.stale = true
	}
	return nil
}

// dueFetchPage bounds the keys of one fetch of due keys: a reply carries
// every state of each key, and the exchange refuses messages over 64 MiB.
const dueFetchPage = allAtOncePage

// fetchDue is fetchKeys for the due keys of a watermark, which may be most
// of the keys still remote: in pages of dueFetchPage keys, each key with
// all the owners the table lists it under.
func (t *task) fetchDue(ctx context.Context, remote map[string][][]byte) (map[string][]byte, map[string][][]byte, error) {
	n := 0
	for _, keys := range remote {
		n += len(keys)
	}
	if n <= dueFetchPage {
		return t.fetchKeys(ctx, remote)
	}
	owners := map[string][]string{}
	var order [][]byte
	for o, keys := range remote {
		for _, k := range keys {
			if _, ok := owners[string(k)]; !ok {
				order = append(order, k)
			}
			owners[string(k)] = append(owners[string(k)], o)
		}
	}
	fetched, taken := map[string][]byte{}, map[string][][]byte{}
	for lo := 0; lo < len(order); lo += dueFetchPage {
		page := map[string][][]byte{}
		for _, k := range order[lo:min(lo+dueFetchPage, len(order))] {
			for _, o := range owners[string(k)] {
				page[o] = append(page[o], k)
			}
		}
		f, tk, err := t.fetchKeys(ctx, page)
		if err != nil {
			return nil, nil, err
		}
		for slot, v := range f {
			fetched[slot] = v
		}
		for o, keys := range tk {
			taken[o] = append(taken[o], keys...)
		}
	}
	return fetched, taken, nil
}
