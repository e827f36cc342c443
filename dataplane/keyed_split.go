package dataplane

import (
	"context"
	"fmt"
	"time"
)

// A batch whose keys are partly still on old owners (lazy migration) used
// to wait, whole, for the fetch of the remote ones. processSplit holds back
// only the records of those keys: the fetch runs while the records of the
// local keys are processed, written and their output sent, and the held
// records follow once their values are here. A key's records are all local
// or all held, and each part keeps the batch's order, so every key's
// records are processed in order; only records of different keys change
// places, which per-key order allows. The task goroutine still ends the
// batch only when the fetch has: barriers, watermarks, handoffs and
// checkpoints that follow find every record of the batch processed, as
// before.

// fetchResult is what fetchKeys returned, from its goroutine.
type fetchResult struct {
	fetched map[string][]byte
	taken   map[string][][]byte
	err     error
}

// processSplit runs recs, whose keys are st's (looked up: refs, one per
// key, 0 for a local key; remote, the fetch of the others by owner).
func (t *task) processSplit(ctx context.Context, recs []Record, st *State, refs []uint32, remote map[string][][]byte) error {
	ks := t.keyed
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan fetchResult, 1)
	go func() {
		fetched, taken, err := t.fetchKeys(fctx, remote)
		done <- fetchResult{fetched: fetched, taken: taken, err: err}
	}()

	// The local keys' records, in a State of their own: st keeps the held
	// keys' slots untouched until their values arrive.
	if ks.splitLocal == nil {
		ks.splitLocal = newState(ks.names, len(st.keys))
	}
	lst := ks.splitLocal
	lst.reset()
	localRecs, heldRecs := ks.splitRecs[0][:0], ks.splitRecs[1][:0]
	defer func() { // reused: keep the arrays, not this batch's records
		clear(localRecs)
		clear(heldRecs)
		ks.splitRecs = [2][]Record{localRecs[:0], heldRecs[:0]}
	}()
	for i := range recs {
		if refs[st.index[string(recs[i].Key)]] != 0 {
			heldRecs = append(heldRecs, recs[i])
			continue
		}
		localRecs = append(localRecs, recs[i])
		lst.addKey(recs[i].Key)
	}
	all := ks.local[:0] // the key numbers of lst, all of them
	for i := range lst.keys {
		all = append(all, i)
	}
	ks.local = all
	getStart := time.Now()
	if err := ks.loadLocal(lst, all); err != nil {
		return err
	}
	ks.getNanos.Add(uint64(time.Since(getStart).Nanoseconds()))
	if err := ks.op.ProcessKeyed(localRecs, lst, t.out.emit); err != nil {
		return fmt.Errorf("operator %s: %w", t.opName, err)
	}
	if err := t.writeState(lst); err != nil {
		return err
	}
	// Their output leaves now, not after the fetch (rejected records
	// first, as at the end of every batch).
	t.dead.Flush(ctx)
	n, err := t.out.flush(ctx, t.w)
	t.stats.recordsOut.Add(uint64(n))
	if err != nil {
		return err
	}

	var res fetchResult
	select {
	case res = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if res.err != nil {
		return res.err
	}
	for slot, v := range res.fetched {
		st.setFetched(slot, v)
	}
	if err := ks.op.ProcessKeyed(heldRecs, st, t.out.emit); err != nil {
		return fmt.Errorf("operator %s: %w", t.opName, err)
	}
	if err := t.writeState(st); err != nil {
		return err
	}
	ks.forgetTaken(remote, res.taken)
	return nil
}

// writeState writes what st has to write back (see writes).
func (t *task) writeState(st *State) error {
	ks := t.keyed
	putStart := time.Now()
	kvs := ks.writes(st, ks.kvs[:0])
	ks.localIdx.addWrites(kvs, ks.fresh)
	if err := ks.store.MultiPut(kvs); err != nil {
		return fmt.Errorf("task %s: write state: %w", t.id, err)
	}
	clear(kvs) // drop the references to this batch's keys and values
	ks.kvs = kvs[:0]
	ks.putNanos.Add(uint64(time.Since(putStart).Nanoseconds()))
	return nil
}
