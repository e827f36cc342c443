package dataplane

import (
	"context"
	"fmt"
	"strconv"
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

// State is one batch's view of keyed state. Values returned by Get must not
// be modified; Put takes ownership of value.
type State struct {
	names  []string
	values map[string][]byte // stateIndex byte + user key → value (nil = absent)
	dirty  map[string]bool
}

func (s *State) slot(state string, key []byte) string {
	for i, n := range s.names {
		if n == state {
			return string(rune(i)) + string(key)
		}
	}
	panic(fmt.Sprintf("state %q is not declared by the operator (declared: %v)", state, s.names))
}

// Get returns the value of state for key, or nil.
func (s *State) Get(state string, key []byte) []byte { return s.values[s.slot(state, key)] }

// Put sets the value of state for key.
func (s *State) Put(state string, key []byte, value []byte) {
	k := s.slot(state, key)
	s.values[k] = value
	s.dirty[k] = true
}

// Delete removes the value of state for key.
func (s *State) Delete(state string, key []byte) { s.Put(state, key, nil) }

// Lazy migration modes ("LazyByKeyCancellingTaskMigrationMode").
const (
	ModeFetchOnDemand = "fetch-on-demand"
	ModeEventual      = "eventual"
)

// Job parameters read by the keyed state runtime.
const (
	ParamMigrationMode    = "LazyByKeyCancellingTaskMigrationMode"
	ParamGradualBatchSize = "LazyByKeyGradualMigrationBatchSize"
	// ParamRemotePebbleAddrs lists the state servers of the "remote-pebble"
	// backend: comma-separated host:port, sharded by bucket in this order.
	ParamRemotePebbleAddrs = "RemotePebbleAddrs"
)

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

	owners  sync.Map // task id → control.TaskRef of owners named in the KLT
	eager   bool     // a removed task handed keys over: migrate them all progressively
	pending string   // reconfiguration whose keys are being migrated

	lookupBuf []string // owners of a batch's keys ("" = local), reused

	// installed remembers completed handoffs ("reconfig/fromTask") so a
	// retried fast-forward can learn they happened without a new event.
	installed sync.Map

	// shared: every task reads and writes one state service (remote-pebble),
	// so a bucket's values need no moving — only its ownership changes.
	shared bool

	keysFetched  atomic.Uint64
	bytesMoved   atomic.Uint64
	lookupNanos  atomic.Uint64
	lookupCount  atomic.Uint64
	getNanos     atomic.Uint64
	putNanos     atomic.Uint64
	distinctKeys atomic.Uint64
}

// remoteCreds secure connections to remote-pebble servers (nil: plaintext).
func newKeyedState(op StatefulOperator, job control.JobSpec, opName, dir string, remoteCreds credentials.TransportCredentials) (*keyedState, error) {
	backend := job.StateBackend
	if backend == "" {
		backend = "pebble"
	}
	store, err := statesvc.Open(statesvc.Options{Backend: backend, Dir: dir, Addrs: statesvc.ParseAddrs(job.Params[ParamRemotePebbleAddrs]), RemoteCreds: remoteCreds})
	if err != nil {
		return nil, fmt.Errorf("open %s state for %s: %w", backend, opName, err)
	}
	ks := &keyedState{shared: backend == statesvc.BackendRemotePebble, op: op, store: store, klt: statesvc.NewKLT(), opName: opName, buckets: job.NumBuckets, names: op.StateNames(), dir: dir, mode: ModeEventual, gradual: -1}
	if m := job.Params[ParamMigrationMode]; m != "" {
		if m != ModeFetchOnDemand && m != ModeEventual {
			store.Close()
			return nil, fmt.Errorf("%s %q: allowed %q or %q", ParamMigrationMode, m, ModeFetchOnDemand, ModeEventual)
		}
		ks.mode = m
	}
	if g := job.Params[ParamGradualBatchSize]; g != "" {
		n, err := strconv.Atoi(g)
		if err != nil || n == 0 || n < -1 {
			store.Close()
			return nil, fmt.Errorf("%s %q: want a positive number of keys or -1 (all at once)", ParamGradualBatchSize, g)
		}
		ks.gradual = n
	}
	return ks, nil
}

func (ks *keyedState) stateKey(name string, key []byte) []byte {
	return statesvc.StateKey(nil, ks.opName, BucketOf(key, ks.buckets), name, key)
}

// processBatch runs one batch of records this task owns.
func (t *task) processKeyed(ctx context.Context, view *taskView, recs []Record) error {
	ks := t.keyed
	st := &State{names: ks.names, values: map[string][]byte{}, dirty: map[string]bool{}}
	var keys [][]byte
	seen := map[string]bool{}
	for i := range recs {
		if k := string(recs[i].Key); !seen[k] {
			seen[k] = true
			keys = append(keys, recs[i].Key)
		}
	}
	ks.distinctKeys.Add(uint64(len(keys)))
	// Keys whose value is still on another task are fetched first.
	lookStart := time.Now()
	remote := map[string][][]byte{}
	var local [][]byte
	ks.lookupBuf = ks.klt.LookupBatch(keys, ks.lookupBuf[:0])
	for i, k := range keys {
		if owner := ks.lookupBuf[i]; owner != "" {
			remote[owner] = append(remote[owner], k)
		} else {
			local = append(local, k)
		}
	}
	ks.lookupNanos.Add(uint64(time.Since(lookStart).Nanoseconds()))
	ks.lookupCount.Add(1)
	fetched, err := t.fetchKeys(ctx, remote)
	if err != nil {
		return err
	}
	for k, v := range fetched {
		st.values[k] = v
	}
	getStart := time.Now()
	if err := ks.loadLocal(st, local); err != nil {
		return err
	}
	ks.getNanos.Add(uint64(time.Since(getStart).Nanoseconds()))
	if err := ks.op.ProcessKeyed(recs, st, t.out.emit); err != nil {
		return fmt.Errorf("operator %s: %w", t.opName, err)
	}
	putStart := time.Now()
	var kvs []statesvc.KV
	for slot, v := range st.values {
		// Fetched values are written even when unchanged: they now live here.
		if _, wasFetched := fetched[slot]; st.dirty[slot] || wasFetched {
			kvs = append(kvs, statesvc.KV{Key: ks.stateKey(ks.names[slot[0]], []byte(slot[1:])), Value: v})
		}
	}
	if err := ks.store.MultiPut(kvs); err != nil {
		return fmt.Errorf("task %s: write state: %w", t.id, err)
	}
	ks.putNanos.Add(uint64(time.Since(putStart).Nanoseconds()))
	for _, ks2 := range remote {
		for _, k := range ks2 {
			ks.klt.Remove(k)
		}
	}
	return nil
}

func (ks *keyedState) loadLocal(st *State, keys [][]byte) error {
	if len(keys) == 0 {
		return nil
	}
	skeys := make([][]byte, 0, len(keys)*len(ks.names))
	for _, k := range keys {
		for _, n := range ks.names {
			skeys = append(skeys, ks.stateKey(n, k))
		}
	}
	vals, err := ks.store.MultiGet(skeys)
	if err != nil {
		return fmt.Errorf("read state: %w", err)
	}
	i := 0
	for _, k := range keys {
		for si := range ks.names {
			if vals[i] != nil {
				st.values[string(rune(si))+string(k)] = vals[i]
			}
			i++
		}
	}
	return nil
}

// fetchKeys takes the values of keys from their owners, one request per
// owner, all owners in parallel. It returns State slots → values.
func (t *task) fetchKeys(ctx context.Context, byOwner map[string][][]byte) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(byOwner) == 0 {
		return out, nil
	}
	ks := t.keyed
	type result struct {
		keys [][]byte
		vals [][]byte
		err  error
	}
	results := make(chan result, len(byOwner))
	for owner, keys := range byOwner {
		ref, ok := ks.owners.Load(owner)
		if !ok {
			return nil, fmt.Errorf("task %s: key lookup table names owner %q with no known address", t.id, owner)
		}
		skeys := make([][]byte, 0, len(keys)*len(ks.names))
		for _, k := range keys {
			for _, n := range ks.names {
				skeys = append(skeys, ks.stateKey(n, k))
			}
		}
		go func(ref control.TaskRef, keys, skeys [][]byte) {
			vals, err := t.w.fetchState(ctx, t.jobID, ref, skeys)
			results <- result{keys: keys, vals: vals, err: err}
		}(ref.(control.TaskRef), keys, skeys)
	}
	var firstErr error
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
			for si := range ks.names {
				v := r.vals[i]
				i++
				out[string(rune(si))+string(k)] = v
				ks.keysFetched.Add(1)
				ks.bytesMoved.Add(uint64(len(k) + len(v)))
			}
		}
	}
	return out, firstErr
}

// migrateChunk moves up to n keys of the lookup table here in the
// background of normal processing (progressive migration).
func (t *task) migrateChunk(ctx context.Context, n int) error {
	ks := t.keyed
	if n < 0 {
		n = 4096
	}
	entries := ks.klt.Take(n)
	if len(entries) == 0 {
		return nil
	}
	byOwner := map[string][][]byte{}
	for _, e := range entries {
		byOwner[e.Owner] = append(byOwner[e.Owner], e.Key)
	}
	fetched, err := t.fetchKeys(ctx, byOwner)
	if err != nil {
		return err
	}
	kvs := make([]statesvc.KV, 0, len(fetched))
	for slot, v := range fetched {
		if v != nil {
			kvs = append(kvs, statesvc.KV{Key: ks.stateKey(ks.names[slot[0]], []byte(slot[1:])), Value: v})
		}
	}
	if err := ks.store.MultiPut(kvs); err != nil {
		return fmt.Errorf("task %s: store migrated keys: %w", t.id, err)
	}
	for _, e := range entries {
		ks.klt.Remove(e.Key)
	}
	return nil
}

// wantsMigration says whether background migration should run now.
func (ks *keyedState) wantsMigration() bool {
	return ks.klt.Len() > 0 && (ks.mode == ModeEventual || ks.eager)
}

// afterBatch runs progressive migration and reports completion.
func (t *task) afterBatch(ctx context.Context) error {
	ks := t.keyed
	if ks.wantsMigration() {
		if err := t.migrateChunk(ctx, ks.gradual); err != nil {
			return err
		}
	}
	if ks.pending != "" && ks.klt.Len() == 0 {
		t.w.announceProgress(control.MigrationProgress{JobID: t.jobID, ReconfigID: ks.pending, TaskID: t.id, Event: control.EventMigrated, Bytes: ks.bytesMoved.Load()})
		ks.pending = ""
		ks.eager = false
	}
	return nil
}
