package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/statesvc"
)

// Per-task state snapshots.
//
// A snapshot of a stateful task is its keyed state as a Pebble checkpoint
// (hard-linked sstables), the buckets it owns and its key lookup table (the
// keys it owns that still live on another task, with those tasks'
// addresses), written under <dir>/<task id>/. Loading one into a task of a
// fresh job of the same shape restores exactly that state before the task
// starts. Warm-up runs use it to build large state once and reuse it across
// measurement runs; it is also the per-task primitive a checkpoint/recovery
// feature needs (a consistent cut of one task's state, restorable into a new
// task that owns the same buckets), so it knows nothing about warm-up.
//
// Both verbs run on the task's own goroutine for a running task (ordered
// with the records it processes, so the cut is consistent with the batches
// before it) and directly for a task that was deployed but not started.

// dispatchSnapshot serves the snapshot verbs; ok is false for other verbs.
func (w *Worker) dispatchSnapshot(ctx context.Context, verb string, env control.Envelope) (body any, ok bool, err error) {
	if verb != control.VerbSnapshotSave && verb != control.VerbSnapshotLoad {
		return nil, false, nil
	}
	req, err := decodeBody[control.SnapshotRequest](env)
	if err != nil {
		return nil, true, err
	}
	if req.Dir == "" || len(req.TaskIDs) == 0 {
		return nil, true, fmt.Errorf("%s: dir and task_ids are required", verb)
	}
	if req.SettleSeconds < 0 || math.IsNaN(req.SettleSeconds) || math.IsInf(req.SettleSeconds, 0) {
		return nil, true, fmt.Errorf("%s: settle_seconds %v must be a finite number >= 0", verb, req.SettleSeconds)
	}
	// A save may settle and compact its stores for up to SettleSeconds,
	// past the 30 s a control request gets; the activity that sent it
	// waits as long (activities.snapshotSettle).
	if settle := time.Duration(req.SettleSeconds * float64(time.Second)); verb == control.VerbSnapshotSave && settle > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(w.ctx, requestTimeout+time.Duration(len(req.TaskIDs))*settle)
		defer cancel()
	}
	tasks := w.jobTasks(env.JobID, req.TaskIDs)
	if len(tasks) != len(req.TaskIDs) {
		return nil, true, fmt.Errorf("%s: worker %s has %d of the tasks %v of job %q", verb, w.opts.ID, len(tasks), req.TaskIDs, env.JobID)
	}
	var reply control.SnapshotReply
	for _, t := range tasks {
		if t.keyed == nil {
			if verb == control.VerbSnapshotSave && !t.spec.Stateful {
				continue // stateless: nothing to save (the reply lists stateful tasks only)
			}
			if t.spec.Stateful {
				// e.g. a join or window keeping its own state: a snapshot
				// without it would not be the job's state.
				return nil, true, fmt.Errorf("%s: task %s of operator %q keeps state outside the keyed state runtime, which snapshots cannot capture yet", verb, t.id, t.opName)
			}
			return nil, true, fmt.Errorf("%s: task %s keeps no keyed state", verb, t.id)
		}
		dir := filepath.Join(req.Dir, t.id)
		var snap control.TaskSnapshot
		run := func(context.Context, *task) error {
			var err error
			if verb == control.VerbSnapshotSave {
				snap, err = t.saveSnapshot(ctx, dir, time.Duration(req.SettleSeconds*float64(time.Second)))
			} else {
				snap, err = t.loadSnapshot(dir)
			}
			return err
		}
		switch {
		case verb == control.VerbSnapshotLoad && t.started.Load():
			return nil, true, fmt.Errorf("%s: task %s is already running; state is loaded before a task starts", verb, t.id)
		case t.started.Load():
			err = w.onTaskGoroutines(ctx, env.JobID, []string{t.id}, run)
		default:
			err = run(ctx, t)
		}
		if err != nil {
			return nil, true, fmt.Errorf("%s: task %s: %w", verb, t.id, err)
		}
		reply.Tasks = append(reply.Tasks, snap)
	}
	return reply, true, nil
}

// ownedBuckets lists the buckets the task's deployment gives it.
func (t *task) ownedBuckets() []int {
	self := t.view.Load().self
	if self == nil {
		return nil
	}
	var out []int
	for b, idx := range self.table.Buckets {
		if idx == t.index {
			out = append(out, b)
		}
	}
	return out
}

// saveSnapshot checkpoints the task's store into dir/pebble and writes
// dir/task.json. dir must not exist: a snapshot is never overwritten in
// place (a retried save after a completed one fails and says so). With
// settle > 0 the store first finishes its pending compactions (see
// statesvc.Pebble.Settle), for at most that long.
func (t *task) saveSnapshot(ctx context.Context, dir string, settle time.Duration) (control.TaskSnapshot, error) {
	deadline := time.Now().Add(settle)
	settled, waited, err := t.settleStore(ctx, settle)
	if err != nil {
		return control.TaskSnapshot{}, err
	}
	compacted, took := false, time.Duration(0)
	if settled {
		if compacted, took, err = t.compactStore(ctx, time.Until(deadline)); err != nil {
			return control.TaskSnapshot{}, err
		}
	}
	var snap control.TaskSnapshot
	// No background commit between the store's capture and the table's
	// (migrator.go).
	err = t.keyed.mig.holdCommits(func() error {
		var err error
		snap, err = t.saveSnapshotTo(dir, true)
		return err
	})
	snap.Settled, snap.SettleMillis = settled, waited.Milliseconds()
	snap.Compacted, snap.CompactMillis = compacted, took.Milliseconds()
	return snap, err
}

// compactStore runs the store's CompactAll for at most d (see
// statesvc.Pebble.CompactAll: it hands the runs that load the snapshot a
// tree whose values are already in key order).
func (t *task) compactStore(ctx context.Context, d time.Duration) (compacted bool, took time.Duration, err error) {
	s, ok := t.keyed.store.(interface {
		CompactAll(context.Context) (statesvc.CompactStats, error)
	})
	if d <= 0 || !ok {
		return false, 0, nil
	}
	return t.storeStep(ctx, d, "compact", "compacted", func(ctx context.Context) (time.Duration, []any, error) {
		st, err := s.CompactAll(ctx)
		return st.Took, []any{"blob_files_before", st.BlobFilesBefore, "blob_files_after", st.BlobFilesAfter,
			"max_refs_before", st.MaxRefsBefore, "max_refs_after", st.MaxRefsAfter, "took", st.Took.Round(time.Millisecond)}, err
	})
}

// settleStore runs the store's Settle for at most d.
func (t *task) settleStore(ctx context.Context, d time.Duration) (settled bool, waited time.Duration, err error) {
	s, ok := t.keyed.store.(interface {
		Settle(context.Context) (statesvc.SettleStats, error)
	})
	if d <= 0 || !ok {
		return false, 0, nil
	}
	return t.storeStep(ctx, d, "settle", "settled", func(ctx context.Context) (time.Duration, []any, error) {
		st, err := s.Settle(ctx)
		return st.Waited, []any{"compactions", st.Compactions, "debt_before", st.DebtBefore, "debt_after", st.DebtAfter, "waited", st.Waited.Round(time.Millisecond)}, err
	})
}

// storeStep runs step for at most d and logs how it ended. Running out of
// time is not an error: the checkpoint is consistent either way, only
// taken without the step's work (done is then false).
func (t *task) storeStep(ctx context.Context, d time.Duration, verb, past string, step func(context.Context) (time.Duration, []any, error)) (done bool, took time.Duration, err error) {
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	took, attrs, err := step(sctx)
	log := t.w.log.With(append([]any{"task", t.id}, attrs...)...)
	switch {
	case err == nil:
		log.Info("store " + past + " before its snapshot")
		return true, took, nil
	case sctx.Err() != nil && ctx.Err() == nil:
		log.Warn("store not "+past+" when its time ran out; snapshot taken as it is", "limit", d)
		return false, took, nil
	default:
		return false, took, fmt.Errorf("%s store before snapshot: %w", verb, err)
	}
}

// saveSnapshotTo is saveSnapshot; count false leaves Keys and Entries at 0
// (counting scans the whole state, which a periodic checkpoint skips).
func (t *task) saveSnapshotTo(dir string, count bool) (control.TaskSnapshot, error) {
	ks := t.keyed
	cp, ok := ks.store.(interface{ Checkpoint(string) error })
	if !ok {
		return control.TaskSnapshot{}, fmt.Errorf("state backend %q cannot be snapshotted (only %q)", t.view.Load().job.StateBackend, statesvc.BackendPebble)
	}
	if _, err := os.Stat(dir); err == nil {
		return control.TaskSnapshot{}, fmt.Errorf("snapshot directory %s already exists", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return control.TaskSnapshot{}, fmt.Errorf("snapshot directory: %w", err)
	}
	snap := control.TaskSnapshot{TaskID: t.id, Operator: t.opName, Index: t.index, NumBuckets: ks.buckets, Buckets: t.ownedBuckets()}
	if count {
		if err := ks.countState(&snap); err != nil {
			return snap, err
		}
	}
	stateDir := filepath.Join(dir, checkpoint.SnapshotStateDir)
	if err := cp.Checkpoint(stateDir); err != nil {
		return snap, err
	}
	size, err := dirBytes(stateDir)
	if err != nil {
		return snap, err
	}
	snap.Bytes = size
	all := make([]int, ks.buckets)
	for i := range all {
		all[i] = i
	}
	for _, e := range ks.klt.Segments(all) {
		snap.KLT = append(snap.KLT, control.KLTSegment{Bucket: e.Bucket, Owner: e.Owner, Hashes: e.Hashes})
		if _, named := snap.KLTOwners[e.Owner]; !named {
			ref, known := ks.owners.Load(e.Owner)
			if !known {
				return snap, fmt.Errorf("key lookup table names owner %q with no known address", e.Owner)
			}
			if snap.KLTOwners == nil {
				snap.KLTOwners = map[string]control.TaskRef{}
			}
			snap.KLTOwners[e.Owner] = ref.(control.TaskRef)
		}
	}
	data, err := json.Marshal(snap)
	if err != nil {
		return snap, fmt.Errorf("encode %s: %w", checkpoint.SnapshotTaskFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.SnapshotTaskFile), data, 0o644); err != nil {
		return snap, fmt.Errorf("write %s: %w", checkpoint.SnapshotTaskFile, err)
	}
	snap.KLT, snap.KLTOwners = nil, nil // the reply carries counts only
	return snap, nil
}

// countState counts the operator's keys and values in the store.
func (ks *keyedState) countState(snap *control.TaskSnapshot) error {
	prefix := statesvc.OperatorPrefix(ks.opName)
	lastBucket := -1
	var seen map[string]bool // distinct user keys of the current bucket (several states only)
	var scanErr error
	err := ks.store.Scan(prefix, statesvc.PrefixEnd(prefix), func(k, _ []byte) bool {
		snap.Entries++
		if len(ks.names) == 1 {
			snap.Keys++
			return true
		}
		_, bucket, _, user, err := statesvc.ParseStateKey(k)
		if err != nil {
			scanErr = err
			return false
		}
		if bucket != lastBucket {
			lastBucket, seen = bucket, map[string]bool{}
		}
		if !seen[string(user)] {
			seen[string(user)] = true
			snap.Keys++
		}
		return true
	})
	if err = errors.Join(err, scanErr); err != nil {
		return fmt.Errorf("count state: %w", err)
	}
	return nil
}

// loadSnapshot replaces the (not yet started) task's store with the
// checkpoint in dir and installs its lookup table. The snapshot must be of
// the same operator and the same buckets.
func (t *task) loadSnapshot(dir string) (control.TaskSnapshot, error) {
	// A retried load (its request timed out while this worker still
	// copied) waits for the one it repeats, then loads again.
	t.snapshotMu.Lock()
	defer t.snapshotMu.Unlock()
	ks := t.keyed
	var snap control.TaskSnapshot
	data, err := os.ReadFile(filepath.Join(dir, checkpoint.SnapshotTaskFile))
	if err != nil {
		return snap, fmt.Errorf("read snapshot: %w", err)
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		return snap, fmt.Errorf("decode %s: %w", filepath.Join(dir, checkpoint.SnapshotTaskFile), err)
	}
	if snap.Operator != t.opName {
		return snap, fmt.Errorf("snapshot %s is of operator %q, task is of %q", dir, snap.Operator, t.opName)
	}
	if snap.NumBuckets != ks.buckets {
		return snap, fmt.Errorf("snapshot %s has NumBuckets %d, job has %d", dir, snap.NumBuckets, ks.buckets)
	}
	if own := t.ownedBuckets(); !slices.Equal(own, snap.Buckets) {
		return snap, fmt.Errorf("snapshot %s owns %d buckets %s, task owns %d buckets %s", dir, len(snap.Buckets), bucketList(snap.Buckets), len(own), bucketList(own))
	}
	if b := t.view.Load().job.StateBackend; b != "" && b != statesvc.BackendPebble {
		// A remote-pebble namespace (or memory) has no directory to restore
		// into: its keys are copied in, so remote runs start from the same
		// warm state as local ones.
		src := filepath.Join(dir, checkpoint.SnapshotStateDir)
		// The scratch copy is removed when an import ends; one still there
		// is from a load that died with its worker (loads are serialised).
		ks.localIdx.invalidate() // until rebuilt below
		if err := os.RemoveAll(ks.dir + ".import"); err != nil {
			return snap, fmt.Errorf("load snapshot %s: clear the scratch copy of an earlier load: %w", dir, err)
		}
		if _, _, err := statesvc.ImportCheckpoint(src, ks.dir+".import", ks.store, snapshotImportBatchBytes); err != nil {
			return snap, fmt.Errorf("load snapshot %s into %s state: %w", dir, b, err)
		}
		// A store of this task alone (memory) then lists its keys for
		// handoffs; shared state has no index.
		if err := ks.localIdx.rebuild(ks.store, ks.opName); err != nil {
			return snap, fmt.Errorf("index the loaded keys: %w", err)
		}
	} else if err := t.restoreLocal(dir); err != nil {
		return snap, err
	}
	for id, ref := range snap.KLTOwners {
		ks.owners.Store(id, ref)
	}
	for i, e := range snap.KLT { // check all before adding any
		if e.Bucket < 0 || e.Bucket >= max(1, ks.buckets) || e.Owner == "" {
			return snap, fmt.Errorf("snapshot %s: lookup table segment %d has bucket %d (allowed [0, %d)) and owner %q (must not be empty)", dir, i, e.Bucket, max(1, ks.buckets), e.Owner)
		}
	}
	for _, e := range snap.KLT {
		if err := ks.klt.AddSegment(statesvc.Segment{Bucket: e.Bucket, Owner: e.Owner, Hashes: e.Hashes}); err != nil {
			return snap, fmt.Errorf("snapshot %s: %w", dir, err)
		}
	}
	snap.KLT, snap.KLTOwners = nil, nil
	return snap, nil
}

// snapshotImportBatchBytes is the MultiPut batch a snapshot is copied into
// a store that cannot restore a checkpoint in: 1 MiB, the handoff's chunk.
const snapshotImportBatchBytes = 1 << 20

// restoreLocal replaces the task's Pebble store with the checkpoint of the
// snapshot in dir.
func (t *task) restoreLocal(dir string) error {
	ks := t.keyed
	ks.localIdx.invalidate() // until rebuilt below: a failed restore lists at a handoff
	if err := ks.store.Close(); err != nil {
		return fmt.Errorf("close state: %w", err)
	}
	if err := os.RemoveAll(ks.dir); err != nil {
		return fmt.Errorf("clear state directory: %w", err)
	}
	if err := statesvc.RestoreCheckpoint(filepath.Join(dir, checkpoint.SnapshotStateDir), ks.dir); err != nil {
		return err
	}
	store, err := statesvc.Open(statesvc.Options{Backend: statesvc.BackendPebble, Dir: ks.dir, Volatile: true}) // as newKeyedState
	if err != nil {
		return fmt.Errorf("open restored state: %w", err)
	}
	ks.store = store
	// Before the task starts, so no write is missed: a later handoff then
	// needs no listing (local_index.go).
	if err := ks.localIdx.rebuild(store, ks.opName); err != nil {
		return fmt.Errorf("index the restored keys: %w", err)
	}
	// A restored store's value cache is empty, and a task that starts on it
	// reads its keys from Pebble one miss at a time for its first seconds;
	// stores filled by writes (remote, bulk moves) start warm.
	start := time.Now()
	keys, n, err := statesvc.WarmCache(store)
	if err != nil {
		return fmt.Errorf("warm the restored state's value cache: %w", err)
	}
	t.w.log.Info("restored state read into the value cache", "task", t.id, "keys", keys, "bytes", n, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// bucketList shows at most 8 buckets of bs.
func bucketList(bs []int) string {
	if len(bs) > 8 {
		return fmt.Sprintf("%v…", bs[:8])
	}
	return fmt.Sprint(bs)
}

func dirBytes(dir string) (uint64, error) {
	var n uint64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += uint64(info.Size())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return n, nil
}
