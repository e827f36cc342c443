package dataplane

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"koala/dataplane/control"
	"koala/statesvc"
)

// StatefulOperator is a keyed operator with named value states. The runtime
// loads the state of every distinct key of a batch with one multi-get
// (fetching keys that still live on another task first), calls
// ProcessKeyed, then writes what changed with one multi-put.
type StatefulOperator interface {
	StateNames() []string
	ProcessKeyed(in []Record, st *State, emit Emit) error
}

// keyedState is the state side of a stateful task: its store, its key
// lookup table and the migration counters.
type keyedState struct {
	op      StatefulOperator
	store   statesvc.Store
	klt     *statesvc.KLT
	opName  string
	buckets int
	names   []string
	mode    string
	gradual int
	dir     string

	// size is the store's size, for status (StateBytes).
	size stateSize

	owners sync.Map // task id → control.TaskRef of owners named in the KLT
	eager  bool     // a removed task handed keys over: migrate them all progressively
	// bulk: a stop-and-restart or DRRS handoff, whose state is copied at
	// once in chunks of chunkBytes (StateMigrationChunkSize), back to back,
	// instead of one pull per batch or idle tick.
	bulk       bool
	chunkBytes int
	// pending is the reconfiguration whose keys are being migrated: whose
	// "migrated" report this task still owes (nil or "": none). Status
	// reads it off the task's goroutine, hence atomic: the table can be
	// empty before the report, while a chunk still takes or drops keys at
	// an old owner, which must not stop until then.
	pending atomic.Pointer[string]

	// pullPage is the most keys one bucket pull asks for when migrating
	// all at once (allAtOncePage; a field so that a test can page small
	// buckets).
	pullPage int

	lookupBuf []uint32 // KLT refs of a batch's keys (0 = local), reused
	batch     *State   // processKeyed's State, reset and reused per batch
	// localRecs are processAsync's records of local keys, reused.
	localRecs []Record
	// pipe holds the records whose fetch is out (fetch_pipeline.go);
	// syncFetch makes each batch end with its own fetch: set while a
	// batch with a late bound runs, and by benchmarks that time whole
	// batches.
	pipe      fetchPipe
	syncFetch bool
	local     []int // key numbers of a batch read from the local store, reused
	kvs       []statesvc.KV
	hints     []indexHint // by kvs index: what the batch's read found (writes)
	owned     []bool      // by kvs index: the operator gave the value up (State.PutOwned)

	// installed remembers completed handoffs ("reconfig/fromTask") so a
	// retried fast-forward can learn they happened without a new event.
	installed sync.Map

	// shared: every task reads and writes one state service (remote-pebble),
	// so a bucket's values need no moving — only its ownership changes.
	shared bool

	// lastCkpt is the last checkpoint this task wrote its part of (set by
	// the task goroutine, read by the migrator too; sent with fetches),
	// served what this task handed out to tasks ahead of it
	// (checkpoint_klt.go).
	lastCkpt atomic.Pointer[string]
	served   servedLog

	// mig moves the table's keys in the background (migrator.go).
	mig *migrator

	// localIdx indexes the keys stored here for handoffs (local_index.go;
	// nil for shared state, whose keys never move).
	localIdx *localIndex

	// frozen lists the operator's keys as of the view frozenView, for the
	// pulls of the buckets' new owners (statefetch.go).
	frozenMu   sync.Mutex
	frozen     statesvc.KeyLister
	frozenView *taskView

	keysFetched  atomic.Uint64
	bytesMoved   atomic.Uint64
	lookupNanos  atomic.Uint64
	lookupCount  atomic.Uint64
	getNanos     atomic.Uint64
	putNanos     atomic.Uint64
	distinctKeys atomic.Uint64

	// reportedMoved is bytesMoved at the last "migrated" event (task
	// goroutine only), lastMigrated that event (read by status requests).
	reportedMoved uint64
	lastMigrated  atomic.Pointer[control.MigrationProgress]
}

// remoteCreds secure connections to remote-pebble servers (nil: plaintext).
func newKeyedState(op StatefulOperator, job control.JobSpec, opName, dir string, remoteCreds credentials.TransportCredentials) (*keyedState, error) {
	backend := job.StateBackend
	if backend == "" {
		backend = "pebble"
	}
	// A task's Pebble store is volatile (no WAL, writes buffered in its
	// value cache): its durability comes from aligned checkpoints alone.
	// Recovery restores a checkpoint into a fresh directory (loadSnapshot
	// clears it first) and never reopens the directory of a lost task, and
	// checkpoints, snapshots, handoffs and fetches all read through the
	// store, which writes back its buffer before any direct read of Pebble.
	// The log would only be written, never read.
	store, err := statesvc.Open(statesvc.Options{Backend: backend, Dir: dir, Addrs: statesvc.ParseAddrs(job.Params[control.ParamRemotePebbleAddrs]),
		// Remote state is per job: every task of this job (including those a
		// reconfiguration deploys, which keep the job id) shares it, and no
		// other job sees it.
		Namespace: job.JobID, RemoteCreds: remoteCreds, Volatile: true})
	if err != nil {
		return nil, fmt.Errorf("open %s state for %s: %w", backend, opName, err)
	}
	ks := &keyedState{shared: backend == statesvc.BackendRemotePebble, op: op, store: store, klt: statesvc.NewKLT(job.NumBuckets), opName: opName, buckets: job.NumBuckets, names: op.StateNames(), dir: dir, mode: control.ModeEventual, gradual: -1, pullPage: allAtOncePage}
	if m := job.Params[control.ParamMigrationMode]; m != "" {
		if m != control.ModeFetchOnDemand && m != control.ModeEventual {
			store.Close()
			return nil, fmt.Errorf("%s %q: allowed %q or %q", control.ParamMigrationMode, m, control.ModeFetchOnDemand, control.ModeEventual)
		}
		ks.mode = m
	}
	if g := job.Params[control.ParamGradualBatchSize]; g != "" {
		n, err := strconv.Atoi(g)
		if err != nil || n == 0 || n < -1 {
			store.Close()
			return nil, fmt.Errorf("%s %q: want a positive number of keys or -1 (all at once)", control.ParamGradualBatchSize, g)
		}
		ks.gradual = n
	}
	if ks.chunkBytes, err = control.StateMigrationChunkSize(job); err != nil {
		store.Close()
		return nil, err
	}
	if !ks.shared {
		ks.localIdx = newLocalIndex(job.NumBuckets)
	}
	if ks.mig, err = newMigrator(job, ks); err != nil {
		store.Close()
		return nil, err
	}
	return ks, nil
}

// lastCheckpoint is the last checkpoint this task wrote its part of ("":
// none).
func (ks *keyedState) lastCheckpoint() string {
	if p := ks.lastCkpt.Load(); p != nil {
		return *p
	}
	return ""
}

func (ks *keyedState) setLastCheckpoint(id string) { ks.lastCkpt.Store(&id) }

// close stops the background migration, then closes the store.
func (ks *keyedState) close() error {
	ks.mig.close()
	return ks.store.Close()
}

func (ks *keyedState) stateKey(name string, key []byte) []byte {
	return statesvc.StateKey(nil, ks.opName, statesvc.BucketOf(key, ks.buckets), name, key)
}

// stateKeyBuf builds the state keys of a batch into shared chunks instead
// of one allocation per key. Returned keys stay valid (chunks are never
// reused), so they may be handed to the store.
type stateKeyBuf struct{ buf []byte }

const stateKeyChunk = 16 << 10

func (kb *stateKeyBuf) keyInBucket(ks *keyedState, bucket int, name string, user []byte) []byte {
	need := 5 + len(ks.opName) + len(name) + len(user)
	if cap(kb.buf)-len(kb.buf) < need {
		kb.buf = make([]byte, 0, max(stateKeyChunk, need))
	}
	s := len(kb.buf)
	kb.buf = statesvc.StateKey(kb.buf, ks.opName, bucket, name, user)
	return kb.buf[s:len(kb.buf):len(kb.buf)]
}

func (kb *stateKeyBuf) key(ks *keyedState, name, user string) []byte {
	u := []byte(user) // short-lived: StateKey copies it
	return kb.keyInBucket(ks, statesvc.BucketOf(u, ks.buckets), name, u)
}

// processKeyed runs one batch of records this task owns.
func (t *task) processKeyed(ctx context.Context, view *taskView, recs []Record) error {
	ks := t.keyed
	p := &ks.pipe // fetch_pipeline.go
	async := ks.asyncFetch()
	if p.active() {
		if err := t.settleFetches(ctx, false); err != nil {
			return err
		}
		for p.held > p.maxHeld || (!async && p.active()) {
			if err := t.stepFetches(ctx); err != nil {
				return err
			}
		}
	}
	p.seq++
	if p.active() {
		if recs, _ = p.hold(recs, p.seq, nil); len(recs) == 0 {
			return nil
		}
	}
	return t.runKeyed(ctx, recs, async, p.seq)
}

// runKeyed runs recs, none of whose keys is in the fetch pipeline; with
// async the records of remote keys may wait there for their fetch (seq:
// the number of recs' oldest batch).
func (t *task) runKeyed(ctx context.Context, recs []Record, async bool, seq uint64) error {
	ks := t.keyed
	// One State reused batch after batch: allocating its map and slices
	// per batch was a visible share of the per-batch cost. Nothing keeps
	// it past the batch (the operator gets it for ProcessKeyed only).
	if ks.batch == nil {
		ks.batch = newState(ks.names, len(recs))
	}
	st := ks.batch
	st.reset()
	for i := range recs {
		st.addKey(recs[i].Key)
	}
	ks.distinctKeys.Add(uint64(len(st.keys)))
	// Keys whose value may still be on another task are fetched first.
	lookStart := time.Now()
	var remote map[string][][]byte
	local := ks.local[:0]
	refs, owners := ks.mig.lookupBatch(st.keys, ks.lookupBuf[:0], async)
	ks.lookupBuf = refs
	for ki, k := range st.keys {
		if refs[ki] == 0 {
			local = append(local, ki)
			continue
		}
		if remote == nil {
			remote = map[string][][]byte{}
		}
		for o := range strings.SplitSeq(owners[refs[ki]-1], statesvc.OwnerSep) {
			remote[o] = append(remote[o], k)
		}
	}
	ks.local = local
	ks.lookupNanos.Add(uint64(time.Since(lookStart).Nanoseconds()))
	ks.lookupCount.Add(1)
	if remote != nil {
		// Only the remote keys' records wait for their fetch; with async
		// the task goes on with later batches meanwhile, else it waits
		// for it here (fetch_pipeline.go).
		if err := t.processAsync(ctx, recs, st, refs, remote, seq); err != nil || async {
			return err
		}
		return t.drainFetches(ctx)
	}
	getStart := time.Now()
	if err := ks.loadLocal(st, local); err != nil {
		return err
	}
	ks.getNanos.Add(uint64(time.Since(getStart).Nanoseconds()))
	if err := ks.op.ProcessKeyed(recs, st, t.out.emit); err != nil {
		return fmt.Errorf("operator %s: %w", t.opName, err)
	}
	return t.writeState(st)
}

// writeState writes what st has to write back (see writes).
func (t *task) writeState(st *State) error {
	ks := t.keyed
	putStart := time.Now()
	kvs := ks.writes(st, ks.kvs[:0])
	ks.localIdx.addWrites(kvs, ks.hints)
	if err := statesvc.PutOwned(ks.store, kvs, ks.owned); err != nil {
		return fmt.Errorf("task %s: write state: %w", t.id, err)
	}
	clear(kvs) // drop the references to this batch's keys and values
	ks.kvs = kvs[:0]
	ks.putNanos.Add(uint64(time.Since(putStart).Nanoseconds()))
	return nil
}

// writes appends to kvs what st has to write back: the operator's changes
// and fetched values (which now live here, changed or not), with the store
// keys loadLocal built where it built them.
// It sets ks.hints[i] to what the batch's read of kvs[i]'s key found in
// the store, and ks.owned[i] for the values the operator gave up.
func (ks *keyedState) writes(st *State, kvs []statesvc.KV) []statesvc.KV {
	var kb stateKeyBuf
	ks.hints, ks.owned = ks.hints[:0], ks.owned[:0]
	st.written(func(si int, key []byte, sl *stateSlot) {
		if sl.skey == nil {
			sl.skey = kb.keyInBucket(ks, statesvc.BucketOf(key, ks.buckets), ks.names[si], key)
		}
		kvs = append(kvs, statesvc.KV{Key: sl.skey, Value: sl.value})
		h := hintNone // a fetched value is new here, but may have been here before
		switch {
		case sl.fetched:
		case sl.absent:
			h = hintAbsent
		case sl.stored:
			h = hintStored
		}
		ks.hints = append(ks.hints, h)
		ks.owned = append(ks.owned, sl.owned)
	})
	return kvs
}

// forgetTaken drops the lookup entries of keys whose values were taken
// from their owners (once those values are stored here) and ends the
// claims on every key looked up as remote (migrator.release).
func (ks *keyedState) forgetTaken(remote, taken map[string][][]byte) {
	ks.mig.release(remote, taken)
}

// loadLocal reads the values of key numbers kis of st from the local
// store into their slots, keeping the store keys for the write back.
func (ks *keyedState) loadLocal(st *State, kis []int) error {
	if len(kis) == 0 {
		return nil
	}
	skeys := make([][]byte, 0, len(kis)*len(ks.names))
	var kb stateKeyBuf
	for _, ki := range kis {
		k := st.keys[ki]
		b := statesvc.BucketOf(k, ks.buckets)
		for si, n := range ks.names {
			sk := kb.keyInBucket(ks, b, n, k)
			st.slotOf(si, ki).skey = sk
			skeys = append(skeys, sk)
		}
	}
	vals, err := ks.store.MultiGet(skeys)
	if err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	i := 0
	for _, ki := range kis {
		for si := range ks.names {
			sl := st.slotOf(si, ki)
			sl.value, sl.absent, sl.stored = vals[i], vals[i] == nil, vals[i] != nil
			i++
		}
	}
	return nil
}

// fetchKeys takes the values of keys from their owners, one request per
// owner, all owners in parallel. It returns State slots → values and, per
// owner, the keys it had a value for. The key lookup table may list a key
// under an owner that does not hold it (it keeps key hashes: a false
// positive, or a hash shared with another owner's key), so a key can come
// back absent from every owner: then its value, if any, is local, and the
// slots no owner had are read from the local store. Only keys an owner had
// are reported as taken: their lookup entries may go, the others' not.
func (t *task) fetchKeys(ctx context.Context, byOwner map[string][][]byte) (map[string][]byte, map[string][][]byte, error) {
	out := map[string][]byte{}
	if len(byOwner) == 0 {
		return out, nil, nil
	}
	ks := t.keyed
	type result struct {
		owner string
		keys  [][]byte
		vals  [][]byte
		err   error
	}
	results := make(chan result, len(byOwner))
	after := ks.lastCheckpoint()
	for owner, keys := range byOwner {
		ref, ok := ks.owners.Load(owner)
		if !ok {
			return nil, nil, fmt.Errorf("task %s: key lookup table names owner %q with no known address", t.id, owner)
		}
		skeys := make([][]byte, 0, len(keys)*len(ks.names))
		for _, k := range keys {
			for _, n := range ks.names {
				skeys = append(skeys, ks.stateKey(n, k))
			}
		}
		go func(owner string, ref control.TaskRef, keys, skeys [][]byte) {
			vals, err := t.w.fetchState(ctx, t.jobID, ref, skeys, after)
			results <- result{owner: owner, keys: keys, vals: vals, err: err}
		}(owner, ref.(control.TaskRef), keys, skeys)
	}
	var firstErr error
	taken := map[string][][]byte{}
	for range byOwner {
		r := <-results
		if r.err != nil {
			if firstErr == nil {
				firstErr = r.err
			}
			continue
		}
		i := 0
		for _, k := range r.keys {
			had := false
			for si := range ks.names {
				v := r.vals[i]
				i++
				if v == nil {
					continue
				}
				had = true
				out[string(rune(si))+string(k)] = v
				ks.keysFetched.Add(1)
				ks.bytesMoved.Add(uint64(len(k) + len(v)))
			}
			if had {
				taken[r.owner] = append(taken[r.owner], k)
			}
		}
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	// Slots no owner had: the local value (a false positive's key is local).
	var missing [][]byte
	seen := map[string]bool{}
	for _, keys := range byOwner {
		for _, k := range keys {
			if seen[string(k)] {
				continue
			}
			seen[string(k)] = true
			for si := range ks.names {
				if _, ok := out[string(rune(si))+string(k)]; !ok {
					missing = append(missing, k)
					break
				}
			}
		}
	}
	if len(missing) > 0 {
		loc := newState(ks.names, len(missing))
		kis := make([]int, len(missing))
		for i, k := range missing {
			kis[i] = loc.addKey(k)
		}
		if err := ks.loadLocal(loc, kis); err != nil {
			return nil, nil, err
		}
		for ki, k := range loc.keys {
			for si := range ks.names {
				slot := string(rune(si)) + string(k)
				if v := loc.slotOf(si, ki).value; v != nil {
					if _, ok := out[slot]; !ok {
						out[slot] = v
					}
				}
			}
		}
	}
	return out, taken, nil
}

// setPending sets the reconfiguration whose keys are being migrated ("" once
// reported).
func (ks *keyedState) setPending(id string) { ks.pending.Store(&id) }

// pendingReport is the reconfiguration whose "migrated" report the task
// still owes, "" when none; safe off the task's goroutine.
func (ks *keyedState) pendingReport() string {
	if p := ks.pending.Load(); p != nil {
		return *p
	}
	return ""
}
