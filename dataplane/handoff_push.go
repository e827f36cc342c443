package dataplane

import (
	"context"
	"fmt"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// State push: how stop-and-restart and DRRS move keyed state.
//
// A bulk handoff moves every key of the given buckets at once. Its old
// owner has stopped writing them (from the handoff on, their records are
// forwarded), so it needs neither the key lookup table nor the pull
// protocol of a lazy move: it scans the buckets it gives away, once, and
// streams their raw state (every state name, keys already in the store's
// layout) to the new owner in chunks of about StateMigrationChunkSize
// bytes, on the same ordered stream as the KLT end and the forwarded
// records that follow. The new owner writes each chunk to its store as it
// arrives; when the end arrives its state is complete, before any record
// of those buckets is processed there (direct records wait at the gate or,
// for stop-and-restart, behind paused sources). Per key that is one scan
// step on the old owner and one batch write on the new one, against a
// lookup entry sent, installed and removed, a second scan, a point read and
// a tombstone for a pull, which made the bulk move key-bound.
//
// Checkpoints: between the push and the new owner's install neither task's
// part would hold the moved values, and the install ack (handoff_ack.go)
// already makes the old owner refuse its part of any checkpoint in that
// window, as for the lookup entries of a lazy handoff.

// kltStateOffset marks a KLT frame record carrying pushed state: Partition
// is the first bucket of the run of buckets its keys are from, Value the
// sender (as on every KLT record that names its owner), Key state keys and
// their values packed (statesvc.AppendPacked).
const kltStateOffset = -3

// pushBuckets streams the state of buckets to target and then deletes it
// here. It returns the number of state bytes (state keys and values) sent.
func (t *task) pushBuckets(ctx context.Context, target control.TaskRef, buckets []int, me control.TaskRef, reconfigID string) (int, error) {
	ks := t.keyed
	owner := []byte(encodeOwner(me))
	// The frame around a chunk needs a little room under the exchange's
	// 64 MiB message limit.
	limit := min(ks.chunkBytes, control.MaxStateMigrationChunkSize-64<<10)
	sent := 0
	// One move-out (scan, then delete) per run of adjacent buckets (the
	// buckets a task gains are usually one run). This task no longer
	// touches them, so the store packs its buffered writes in place and
	// drops exactly the keys handed out (statesvc.MoveOutPacked); each
	// chunk goes out as the store packed it. A chunk may wait in a local
	// inbox: the store hands over a new buffer for every one.
	for _, run := range bucketRuns(buckets) {
		start, end := statesvc.BucketRange(ks.opName, run[0], run[1])
		err := statesvc.MoveOutPacked(ks.store, start, end, limit, func(chunk []byte) error {
			f := &wire.Frame{Kind: wire.FrameKLT, JobID: t.jobID, FromTask: t.id, ToTask: target.ID, BarrierID: reconfigID,
				Records: []Record{{Key: chunk, Value: owner, Partition: int32(run[0]), Offset: kltStateOffset}}}
			sent += len(chunk)
			return t.w.deliver(ctx, target, f)
		})
		if err != nil {
			return sent, fmt.Errorf("push buckets %d-%d of %s to %s: %w", run[0], run[1]-1, ks.opName, target.ID, err)
		}
	}
	return sent, nil
}

// bucketRuns splits buckets (ascending) into runs of adjacent ones, each
// as [first, last+1).
func bucketRuns(buckets []int) [][2]int {
	var runs [][2]int
	for i := 0; i < len(buckets); {
		j := i + 1
		for j < len(buckets) && buckets[j] == buckets[j-1]+1 {
			j++
		}
		runs = append(runs, [2]int{buckets[i], buckets[j-1] + 1})
		i = j
	}
	return runs
}

// applyPushed writes a chunk of pushed state (see kltStateOffset) to the
// store. Every key must be a state key of this operator in a bucket from
// the record's on (a chunk may run on into the next buckets of a run):
// anything else is a corrupt or misrouted chunk, and writing it would
// plant state no route leads to.
func (ks *keyedState) applyPushed(r *Record, from string) error {
	bucket := int(r.Partition)
	var slots, moved uint64
	var hashes []uint64
	for rest := r.Key; len(rest) > 0; {
		k, v, next, err := statesvc.NextPacked(rest)
		if err != nil {
			return fmt.Errorf("state chunk from %s, bucket %d: %w", from, bucket, err)
		}
		rest = next
		op, b, _, user, err := statesvc.SplitStateKey(k)
		if err != nil {
			return fmt.Errorf("state chunk from %s, bucket %d: %w", from, bucket, err)
		}
		if string(op) != ks.opName || b < bucket || b >= max(1, ks.buckets) {
			return fmt.Errorf("state chunk from %s for buckets %d-%d of %s holds a key of bucket %d of %q", from, bucket, max(1, ks.buckets)-1, ks.opName, b, op)
		}
		slots++
		moved += uint64(len(user) + len(v))
		hashes = append(hashes, statesvc.KeyHash(user))
	}
	ks.localIdx.addMoved(hashes)
	// Through the value cache, as the task's own writes: the new owner's
	// first batches read these keys, and BenchmarkBulkPush moved the
	// counter's state faster this way (8.2-8.6 against 5.1-7.5 MB/s on a
	// busy machine) than writing each chunk straight to Pebble, sorted
	// (statesvc.PutCold), as lazy migration does to spare a running task's
	// working set. PutMoved is MultiPut with the allocations and map
	// growth per key taken out (BenchmarkBulkPushSides); it keeps the
	// chunk, which nothing else uses once delivered.
	if err := statesvc.PutMoved(ks.store, r.Key); err != nil {
		return fmt.Errorf("store state chunk from %s, bucket %d: %w", from, bucket, err)
	}
	ks.keysFetched.Add(slots)
	ks.bytesMoved.Add(moved)
	return nil
}
