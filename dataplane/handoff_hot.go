package dataplane

import (
	"context"
	"fmt"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// Hot state ahead of a lazy move.
//
// A lazy handoff moves no value: the new owner fetches each key on demand
// the first time one of its records comes, and the old owner serves it
// with a point read and a delete. Under the skewed keys of the traces and
// of Nexmark the records right after the swap touch the keys touched right
// before it, so the new owner's first batches wait on fetches of exactly
// the keys its old owner's value cache holds, while that task, on a busy
// machine, serves them one by one. The old owner therefore sends, after
// the buckets' lookup entries and before the handoff's end, the state of
// the keys of those buckets its cache holds, written last first, up to
// LazyHandoffHotBytes (control.ParamHandoffHotBytes), read from memory and
// sent in bulk as a stop-and-restart move sends everything. The new owner
// writes them to its store and drops their lookup entries: they are local
// there before its first record of those buckets, which waits for the
// end. Every other key stays lazy.
//
// The old owner deletes what it sent once sent. Until the new owner acks
// the handoff's end neither task's checkpoint part may count on these
// values (handoff_ack.go, as for a bulk push); after the end the old
// owner no longer has them, so a fetch of one (a lookup entry of another
// key with the same hash) finds none there and the new owner takes its
// own value, as for any false positive of the table.

// kltHotOffset marks a KLT frame record carrying hot state (see above):
// laid out as a kltStateOffset record (Partition the least bucket of the
// handoff, Value the sender, Key state keys and values packed), with all
// the states of a key in the same record, and the new owner drops one
// lookup entry of the sender per key in it.
const kltHotOffset = -5

// pushHot sends target the hot state of buckets (ascending) and deletes it
// here; it returns the keys and state bytes sent.
func (t *task) pushHot(ctx context.Context, target control.TaskRef, buckets []int, me control.TaskRef, reconfigID string) (keys, sent int, err error) {
	ks := t.keyed
	if ks.hotBytes <= 0 || ks.shared || len(buckets) == 0 {
		return 0, 0, nil
	}
	began := time.Now()
	ranges := make([]statesvc.KeyRange, 0, 1)
	for _, run := range bucketRuns(buckets) {
		start, end := statesvc.BucketRange(ks.opName, run[0], run[1])
		ranges = append(ranges, statesvc.KeyRange{Start: start, End: end})
	}
	recent := statesvc.RecentKeys(ks.store, ranges, ks.hotBytes)
	if len(recent) == 0 {
		return 0, 0, nil
	}
	// A key's states lie apart in the store and in the cache: every one of
	// them goes, or the new owner, dropping the key's entry, would lose
	// the states left here.
	seen := make(map[string]bool, len(recent))
	skeys := make([][]byte, 0, len(recent)*len(ks.names))
	for _, k := range recent {
		_, _, _, user, err := statesvc.SplitStateKey(k)
		if err != nil || seen[string(user)] {
			continue
		}
		seen[string(user)] = true
		for _, n := range ks.names {
			skeys = append(skeys, ks.stateKey(n, user))
		}
	}
	vals, err := statesvc.GetCold(ks.store, skeys)
	if err != nil {
		return 0, 0, fmt.Errorf("read hot state of %s: %w", ks.opName, err)
	}
	limit := min(ks.chunkBytes, control.MaxStateMigrationChunkSize-64<<10)
	owner := []byte(encodeOwner(me))
	var (
		chunk []byte
		dels  []statesvc.KV
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		f := &wire.Frame{Kind: wire.FrameKLT, JobID: t.jobID, FromTask: t.id, ToTask: target.ID, BarrierID: reconfigID,
			Records: []Record{{Key: chunk, Value: owner, Partition: int32(buckets[0]), Offset: kltHotOffset}}}
		sent += len(chunk)
		chunk = nil // the frame keeps its buffer: it may wait in a local inbox
		return t.w.deliver(ctx, target, f)
	}
	per := len(ks.names)
	// The cache's sizes leave out the packing: the budget is kept here.
	for i := 0; i+per <= len(skeys) && sent+len(chunk) < ks.hotBytes; i += per {
		had := false
		for j := i; j < i+per; j++ {
			if vals[j] == nil {
				continue
			}
			had = true
			chunk = statesvc.AppendPacked(chunk, skeys[j], vals[j])
			dels = append(dels, statesvc.KV{Key: skeys[j]})
		}
		if had {
			keys++
		}
		if len(chunk) >= limit { // only between keys: see kltHotOffset
			if err := flush(); err != nil {
				return keys, sent, err
			}
		}
	}
	if err := flush(); err != nil {
		return keys, sent, err
	}
	if err := statesvc.PutCold(ks.store, dels); err != nil {
		return keys, sent, fmt.Errorf("delete hot state sent to %s: %w", target.ID, err)
	}
	t.w.log.Info("hot state sent ahead of a lazy move", "task", t.id, "to", target.ID, "reconfig", reconfigID, "keys", keys, "bytes", sent, "took", time.Since(began))
	return keys, sent, nil
}

// applyHot writes a hot state record (kltHotOffset) from owner to the
// store and drops one lookup entry of owner per key in it.
func (ks *keyedState) applyHot(r *Record, owner string) error {
	var users [][]byte
	for rest := r.Key; len(rest) > 0; {
		k, _, next, err := statesvc.NextPacked(rest)
		if err != nil {
			return fmt.Errorf("hot state from %s: %w", owner, err)
		}
		rest = next
		_, _, _, user, err := statesvc.SplitStateKey(k)
		if err != nil {
			return fmt.Errorf("hot state from %s: %w", owner, err)
		}
		// A key's states are adjacent in the record (pushHot).
		if n := len(users); n == 0 || string(users[n-1]) != string(user) {
			users = append(users, append([]byte(nil), user...))
		}
	}
	if err := ks.applyPushed(r, owner); err != nil {
		return err
	}
	ks.klt.RemoveKeys(owner, users)
	return nil
}
