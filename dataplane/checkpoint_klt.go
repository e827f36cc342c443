package dataplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"koala/dataplane/checkpoint"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// Checkpoints while keys are still to fetch (lazy migration).
//
// A new owner's part holds its key lookup table (the keys still on old
// owners), an old owner's part its store — which keeps the values not yet
// fetched — and its served log: the values it handed out to tasks that had
// already written their part of that checkpoint. Restoring resolves the
// table eagerly: a task copies each key its table names under an owner from
// that owner's part of the same checkpoint (store or served log) unless it
// holds the key itself, then starts with an empty table; every task drops
// the keys of buckets it does not own. See the rule in
// checkpoint_barrier.go.

// checkpointServedFile holds an old owner's served log in its part.
const checkpointServedFile = "served.bin"

// servedLog keeps values a task handed out (fetches, bucket pulls) to a
// task already past a checkpoint this task has not written yet: that
// task's part lists the keys as remote, so this task's part of the same
// checkpoint must still hold them although its store no longer does. Only
// values taken while the fetcher is ahead are kept, and only until this
// task writes (or refuses) its part of the fetcher's checkpoint: the
// fetches of an alignment's skew between two tasks, not of an interval.
type servedLog struct {
	mu      sync.Mutex
	entries map[string]servedValue // state key → value
	// passed is the last checkpoint this task wrote or refused its part of
	// (ids sort like their sequence numbers).
	passed string
}

type servedValue struct {
	value []byte
	after string // the fetcher's last checkpoint when it took the value
}

// record keeps the present values of keys, taken by a task whose last
// checkpoint is after. Nothing is kept when this task's part of after is
// already written (its store still had the values then; later parts of
// the fetcher hold them) or when the fetcher never wrote a part (none of
// its parts lists the keys as remote).
func (l *servedLog) record(after string, keys, vals [][]byte) {
	if after == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if after <= l.passed {
		return
	}
	for i, k := range keys {
		if i >= len(vals) || vals[i] == nil {
			continue
		}
		if l.entries == nil {
			l.entries = map[string]servedValue{}
		}
		l.entries[string(k)] = servedValue{value: vals[i], after: after}
	}
}

// forCheckpoint returns the entries a part of checkpoint id must hold:
// those taken by tasks that had written their part of id (or a later one).
// Checkpoint ids sort like their sequence numbers.
func (l *servedLog) forCheckpoint(id string) (keys, vals [][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, e := range l.entries {
		if e.after >= id {
			keys = append(keys, []byte(k))
			vals = append(vals, e.value)
		}
	}
	return keys, vals
}

// prune runs once this task wrote or refused its part of id: it forgets
// the entries no later part can need (taken by tasks whose last checkpoint
// was id or earlier: their parts from the next one on hold the values).
func (l *servedLog) prune(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passed = max(l.passed, id)
	for k, e := range l.entries {
		if e.after <= id {
			delete(l.entries, k)
		}
	}
}

func (l *servedLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// saveServed writes the served log's entries for checkpoint id into the
// part in dir. It runs after the store's checkpoint: a value deleted from
// the store before that was recorded before its delete, so it is in one of
// the two.
func (ks *keyedState) saveServed(dir, id string) (uint64, error) {
	keys, vals := ks.served.forCheckpoint(id)
	if len(keys) == 0 {
		return 0, nil
	}
	data := wire.AppendByteSlices(wire.AppendByteSlices(nil, keys), vals)
	if err := os.WriteFile(filepath.Join(dir, checkpointServedFile), data, 0o644); err != nil {
		return 0, fmt.Errorf("served values: %w", err)
	}
	return uint64(len(data)), nil
}

// loadServed reads the served log of the part in dir (none: empty).
func loadServed(dir string) (keys, vals [][]byte, err error) {
	data, err := os.ReadFile(filepath.Join(dir, checkpointServedFile))
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("served values: %w", err)
	}
	d := wire.NewDecoder(data)
	keys, vals = d.ByteSlices(), d.ByteSlices()
	switch {
	case d.Err() != nil:
		return nil, nil, fmt.Errorf("decode %s: %w", filepath.Join(dir, checkpointServedFile), d.Err())
	case len(d.Rest()) != 0 || len(keys) != len(vals):
		return nil, nil, fmt.Errorf("decode %s: %d keys, %d values, %d trailing bytes", filepath.Join(dir, checkpointServedFile), len(keys), len(vals), len(d.Rest()))
	}
	return keys, vals, nil
}

// kltOwnersOutside names an owner in the task's lookup table that is not a
// task of its operator in the current deployment (a removed task still
// handing its keys over), or "". Such an owner writes no part, so a part
// naming it could not be restored.
func (t *task) kltOwnersOutside(view *taskView) string {
	if t.keyed == nil || t.keyed.klt.Len() == 0 {
		return ""
	}
	for _, o := range t.keyed.klt.Owners() {
		if view.self == nil {
			return o
		}
		if _, ok := view.self.byID[o]; !ok {
			return o
		}
	}
	return ""
}

// resolveRemoteKeys runs at restore, after the task's own part is loaded
// with its lookup table: each key the table names under an owner is copied
// from that owner's part of checkpoint id (its store, else its served log)
// unless this task holds a value of the key (it fetched the key before its
// own part was written; the owner's copy is then stale). The table is then
// empty, and the keys of buckets the task does not own (values its new
// owners copy from this task's part) are dropped. It returns the user keys
// copied.
func (t *task) resolveRemoteKeys(ctx context.Context, store checkpoint.Store, id string) (int, error) {
	ks := t.keyed
	all := make([]int, max(1, ks.buckets))
	for i := range all {
		all[i] = i
	}
	byOwner := map[string][]int{}
	for _, s := range ks.klt.Segments(all) {
		if b := byOwner[s.Owner]; len(b) == 0 || b[len(b)-1] != s.Bucket {
			byOwner[s.Owner] = append(b, s.Bucket)
		}
	}
	owners := slices.Sorted(func(yield func(string) bool) {
		for o := range byOwner {
			if !yield(o) {
				return
			}
		}
	})
	copied := 0
	for _, owner := range owners {
		dir, err := store.FetchTask(ctx, t.jobID, id, owner)
		if err != nil {
			return copied, fmt.Errorf("keys still on %s: %w", owner, err)
		}
		ack, _, err := store.TaskAck(ctx, t.jobID, id, owner)
		if err != nil {
			return copied, err
		}
		if ack.Error != "" || ack.Operator != t.opName {
			return copied, fmt.Errorf("keys still on %s: its part of checkpoint %s is of operator %q (want %q), error %q", owner, id, ack.Operator, t.opName, ack.Error)
		}
		n, err := ks.copyFromPart(dir, owner, byOwner[owner])
		copied += n
		if err != nil {
			return copied, fmt.Errorf("keys still on %s: %w", owner, err)
		}
	}
	ks.klt.RemoveBuckets(all)
	ks.owners.Clear()
	if err := ks.dropBucketsExcept(t.ownedBuckets()); err != nil {
		return copied, err
	}
	return copied, nil
}

// copyFromPart copies into the store the keys of buckets that the lookup
// table names under owner, from owner's part in dir.
func (ks *keyedState) copyFromPart(dir, owner string, buckets []int) (int, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(ks.dir), "restore-"+owner+"-")
	if err != nil {
		return 0, fmt.Errorf("restore from part: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := statesvc.RestoreCheckpoint(filepath.Join(dir, checkpoint.SnapshotStateDir), tmp); err != nil {
		return 0, err
	}
	src, err := statesvc.Open(statesvc.Options{Backend: statesvc.BackendPebble, Dir: tmp})
	if err != nil {
		return 0, fmt.Errorf("open part: %w", err)
	}
	defer src.Close()
	// user key → state index → value, per bucket; the served log fills in
	// what the store no longer had.
	wanted := map[int]map[string][][]byte{}
	for _, b := range buckets {
		wanted[b] = map[string][][]byte{}
	}
	add := func(k, v []byte) error {
		op, b, name, user, err := statesvc.ParseStateKey(k)
		if err != nil {
			return err
		}
		keys, ok := wanted[b]
		si := slices.Index(ks.names, name)
		if !ok || op != ks.opName || si < 0 {
			return nil
		}
		vals := keys[string(user)]
		if vals == nil {
			vals = make([][]byte, len(ks.names))
			keys[string(user)] = vals
		}
		if vals[si] == nil {
			vals[si] = slices.Clone(v)
		}
		return nil
	}
	for _, b := range buckets {
		start, end := statesvc.BucketRange(ks.opName, b, b+1)
		var addErr error
		if err := src.Scan(start, end, func(k, v []byte) bool {
			addErr = add(k, v)
			return addErr == nil
		}); err != nil || addErr != nil {
			return 0, fmt.Errorf("scan bucket %d of the part: %w", b, errors.Join(err, addErr))
		}
	}
	skeys, svals, err := loadServed(dir)
	if err != nil {
		return 0, err
	}
	for i, k := range skeys {
		if err := add(k, svals[i]); err != nil {
			return 0, fmt.Errorf("served values: %w", err)
		}
	}
	copied := 0
	for _, b := range buckets {
		n, err := ks.copyRemote(owner, b, wanted[b])
		copied += n
		if err != nil {
			return copied, err
		}
	}
	return copied, nil
}

// copyRemote writes the values of the candidate keys of bucket b that the
// lookup table names under owner and the store has no value of.
func (ks *keyedState) copyRemote(owner string, b int, cand map[string][][]byte) (int, error) {
	var users []string
	for u := range cand {
		o, ok := ks.klt.Lookup([]byte(u))
		if ok && slices.Contains(statesvc.SplitOwners(o), owner) {
			users = append(users, u)
		}
	}
	if len(users) == 0 {
		return 0, nil
	}
	slices.Sort(users)
	var kb stateKeyBuf
	skeys := make([][]byte, 0, len(users)*len(ks.names))
	for _, u := range users {
		for _, n := range ks.names {
			skeys = append(skeys, kb.keyInBucket(ks, b, n, []byte(u)))
		}
	}
	local, err := ks.store.MultiGet(skeys)
	if err != nil {
		return 0, fmt.Errorf("read restored state: %w", err)
	}
	var kvs []statesvc.KV
	copied := 0
	for i, u := range users {
		here := local[i*len(ks.names) : (i+1)*len(ks.names)]
		if slices.ContainsFunc(here, func(v []byte) bool { return v != nil }) {
			continue // fetched before this task's part was written
		}
		copied++
		for si, v := range cand[u] {
			if v != nil {
				kvs = append(kvs, statesvc.KV{Key: skeys[i*len(ks.names)+si], Value: v})
			}
		}
	}
	ks.localIdx.addKVs(kvs)
	if err := ks.store.MultiPut(kvs); err != nil {
		return 0, fmt.Errorf("store keys copied from %s: %w", owner, err)
	}
	return copied, nil
}

// dropBucketsExcept deletes the operator's keys of every bucket not in
// owned (ascending), one range per run of such buckets.
func (ks *keyedState) dropBucketsExcept(owned []int) error {
	n := max(1, ks.buckets)
	for lo := 0; lo < n; {
		if slices.Contains(owned, lo) {
			lo++
			continue
		}
		hi := lo + 1
		for hi < n && !slices.Contains(owned, hi) {
			hi++
		}
		start, end := statesvc.BucketRange(ks.opName, lo, hi)
		if err := ks.store.DeleteRange(start, end); err != nil {
			return fmt.Errorf("drop buckets [%d, %d) the task does not own: %w", lo, hi, err)
		}
		lo = hi
	}
	return nil
}
