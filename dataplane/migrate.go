package dataplane

import (
	"context"
	"fmt"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/exchange"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// Migration steps the task goroutine runs itself, and its completion.
// Background (eventual) migration is the migrator's (migrator.go); what
// is here moves keys while nothing else needs the task: stop-and-restart's
// and DRRS's bulk copy (sources paused or records held), the pull of
// buckets a timer index does not cover at a watermark (timer_sync.go),
// and tests.

// allAtOncePage is the page size of an all-at-once bucket pull. A reply
// carries the page's keys with every state value, and the exchange refuses
// messages over 64 MiB; 4096 keys keep a page under it for values up to
// about 16 KB, where a whole bucket of a GB-sized state would not fit.
const allAtOncePage = 4096

// nextSegment is the first (bucket, owner) pair the lookup table still
// lists, with the owner's address; ok is false when nothing is left.
func (t *task) nextSegment() (bucket int, owner string, ref control.TaskRef, ok bool, err error) {
	bucket, owner, ok = t.keyed.klt.Next()
	if !ok {
		return 0, "", control.TaskRef{}, false, nil
	}
	r, known := t.keyed.owners.Load(owner)
	if !known {
		return 0, "", control.TaskRef{}, false, fmt.Errorf("task %s: key lookup table names owner %q with no known address", t.id, owner)
	}
	return bucket, owner, r.(control.TaskRef), true, nil
}

// migrateChunk moves keys here from an old owner on the task goroutine:
// it pulls keys of the first (bucket, owner) pair the lookup table still
// lists, and drops that pair once the owner has no more keys of the
// bucket. n > 0 pulls up to n keys; n < 0 ("all at once") takes every key
// the owner still has of the bucket, in pages. It waits for a background
// chunk in flight (chunkMu).
func (t *task) migrateChunk(ctx context.Context, n int) error {
	ks := t.keyed
	ks.mig.chunkMu.Lock()
	defer ks.mig.chunkMu.Unlock()
	bucket, owner, ref, ok, err := t.nextSegment()
	if !ok {
		return err
	}
	limit := n
	if n < 0 {
		limit = ks.pullPage
	}
	for {
		more, err := t.pullBucket(ctx, ref, owner, bucket, limit, 0)
		if err != nil {
			return err
		}
		if !more {
			ks.klt.DropSegment(bucket, owner)
			delete(ks.mig.resume, segmentID{bucket: bucket, owner: owner})
			return nil
		}
		if n > 0 {
			return nil
		}
		// A bucket holding more than a page comes in pages, back to
		// back: all at once means the bucket does not wait for further
		// batches or idle ticks.
	}
}

// bulkMigrate copies every key the lookup table still lists from its old
// owners, bucket by bucket, in pulls of about chunkBytes each, back to back
// on the task goroutine: stop-and-restart has paused the sources and DRRS
// holds the subscale's records, so nothing waits for this task meanwhile.
// Different new owners copy in parallel, each on its own goroutine.
func (t *task) bulkMigrate(ctx context.Context) error {
	ks := t.keyed
	ks.mig.chunkMu.Lock()
	defer ks.mig.chunkMu.Unlock()
	for ks.klt.Len() > 0 {
		bucket, owner, ref, ok, err := t.nextSegment()
		if !ok {
			return err
		}
		for more := true; more; {
			if more, err = t.pullBucket(ctx, ref, owner, bucket, wire.MaxFrameRecords, ks.chunkBytes); err != nil {
				return err
			}
		}
		ks.klt.DropSegment(bucket, owner)
		delete(ks.mig.resume, segmentID{bucket: bucket, owner: owner})
	}
	return nil
}

// pullBucket takes up to limit keys of bucket from owner into the local
// store, with maxBytes > 0 about that many bytes of their state, starting
// where the previous pull of the pair stopped, and reports whether the
// owner stopped at a bound. The caller holds chunkMu.
func (t *task) pullBucket(ctx context.Context, ref control.TaskRef, owner string, bucket, limit, maxBytes int) (bool, error) {
	ks := t.keyed
	seg := segmentID{bucket: bucket, owner: owner}
	keys, vals, more, next, err := t.w.pullState(ctx, t.jobID, ref, bucket, limit, maxBytes, len(ks.names), ks.mig.resume[seg], exchange.FetchTake, ks.lastCheckpoint())
	if err != nil {
		return false, err
	}
	var kvs []statesvc.KV
	var kb stateKeyBuf
	for i, k := range keys {
		for si, name := range ks.names {
			if v := vals[i*len(ks.names)+si]; v != nil {
				kvs = append(kvs, statesvc.KV{Key: kb.keyInBucket(ks, bucket, name, k), Value: v})
				ks.keysFetched.Add(1)
				ks.bytesMoved.Add(uint64(len(k) + len(v)))
			}
		}
	}
	ks.localIdx.addKVs(kvs)
	if err := statesvc.PutCold(ks.store, kvs); err != nil {
		return false, fmt.Errorf("task %s: store migrated keys: %w", t.id, err)
	}
	ks.klt.RemoveKeys(owner, keys)
	if more {
		ks.mig.resume[seg] = next
	}
	return more, nil
}

// wantsMigration says whether background migration should run now.
func (ks *keyedState) wantsMigration() bool {
	return ks.klt.Len() > 0 && (ks.mode == control.ModeEventual || ks.eager)
}

// afterBatch runs after every batch and idle tick: it runs a bulk copy,
// (re)starts background migration, and reports completion once the table
// is empty and no background chunk is still deleting keys from an old
// owner (which may stop as soon as it hears).
func (t *task) afterBatch(ctx context.Context) error {
	ks := t.keyed
	want := ks.wantsMigration()
	ks.mig.want.Store(want && !ks.bulk)
	switch {
	case ks.bulk && ks.klt.Len() > 0:
		if ks.pipe.active() { // no fetch of ours may be out while it copies
			if err := t.outsideBatch(ctx, t.drainFetches); err != nil {
				return err
			}
			if err := t.releaseFrames(ctx); err != nil {
				return err
			}
		}
		if err := t.bulkMigrate(ctx); err != nil {
			return err
		}
	case want:
		ks.mig.kick(ctx, t)
	}
	// The table first: once it is empty no chunk can start, so an idle
	// migrator then has finished every drop.
	if pending := ks.pendingReport(); pending != "" && ks.klt.Len() == 0 && ks.mig.idle() {
		// Bytes are this reconfiguration's: moved since the last report.
		moved := ks.bytesMoved.Load()
		ev := control.MigrationProgress{JobID: t.jobID, ReconfigID: pending, TaskID: t.id, Event: control.EventMigrated,
			Bytes: moved - ks.reportedMoved, At: time.Now().UnixNano()}
		ks.reportedMoved = moved
		ks.lastMigrated.Store(&ev)
		t.w.announceProgress(ev)
		ks.setPending("")
		ks.eager, ks.bulk = false, false
	}
	return nil
}
