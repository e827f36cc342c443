package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// hookStore runs onGet after each read of the store it wraps (the n-th,
// counted from 1) and onPut before each write, so a test can act at a
// chosen point of an owner serving a pull or a drop, or of a commit. Cold
// reads and writes go to the wrapped store's own (statesvc.GetCold,
// PutCold), as they would unwrapped.
type hookStore struct {
	statesvc.Store
	mu    sync.Mutex
	gets  int
	onGet func(n int)
	onPut func(kvs []statesvc.KV)
}

func (h *hookStore) MultiGet(keys [][]byte) ([][]byte, error) {
	return h.read(keys, h.Store.MultiGet)
}

func (h *hookStore) GetCold(keys [][]byte) ([][]byte, error) {
	return h.read(keys, func(keys [][]byte) ([][]byte, error) { return statesvc.GetCold(h.Store, keys) })
}

func (h *hookStore) read(keys [][]byte, get func([][]byte) ([][]byte, error)) ([][]byte, error) {
	vals, err := get(keys)
	h.mu.Lock()
	h.gets++
	n, fn := h.gets, h.onGet
	h.mu.Unlock()
	if fn != nil {
		fn(n)
	}
	return vals, err
}

func (h *hookStore) MultiPut(kvs []statesvc.KV) error {
	h.beforePut(kvs)
	return h.Store.MultiPut(kvs)
}

func (h *hookStore) PutCold(kvs []statesvc.KV) error {
	h.beforePut(kvs)
	return statesvc.PutCold(h.Store, kvs)
}

func (h *hookStore) beforePut(kvs []statesvc.KV) {
	h.mu.Lock()
	fn := h.onPut
	h.mu.Unlock()
	if fn != nil {
		fn(kvs)
	}
}

// setOnPut replaces the write hook (nil: none).
func (h *hookStore) setOnPut(fn func(kvs []statesvc.KV)) {
	h.mu.Lock()
	h.onPut = fn
	h.mu.Unlock()
}

// FrozenKeys is the wrapped store's, so that a pull from a Pebble owner
// takes the path it takes unwrapped.
func (h *hookStore) FrozenKeys(ranges []statesvc.KeyRange) (statesvc.KeyLister, error) {
	return statesvc.FrozenKeys(h.Store, ranges)
}

func (h *hookStore) Checkpoint(dir string) error {
	return h.Store.(interface{ Checkpoint(string) error }).Checkpoint(dir)
}

func (h *hookStore) calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gets
}

// keysInBucket returns n distinct keys of bucket b (of kltCkptBuckets),
// sorted as the bucket's state keys are.
func keysInBucket(b, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if k := fmt.Sprintf("key-%d", i); statesvc.BucketOf([]byte(k), kltCkptBuckets) == b {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// migratorFixture: count-0 of a kltCkptCluster holds n keys of bucket 1
// (count-1's), values 10, 20, ...; count-1's table lists them (the first
// one twice, as a hash collision with a key still remote would) and its
// migrator is marked running, so that its batches claim remote keys,
// while the test runs background chunks itself, of gradual keys each.
type migratorFixture struct {
	c       *kltCkptCluster
	keys    []string
	want    map[string]uint64
	owner   *hookStore
	old, nw *keyedState
}

func newMigratorFixture(t *testing.T, store string, n, gradual int) *migratorFixture {
	t.Helper()
	c := newKLTCkptCluster(t, store)
	f := &migratorFixture{c: c, keys: keysInBucket(1, n), want: map[string]uint64{}, old: c.tasks["count-0"].keyed, nw: c.tasks["count-1"].keyed}
	var kvs []statesvc.KV
	for i, k := range f.keys {
		f.want[k] = uint64(10 * (i + 1))
		kvs = append(kvs, statesvc.KV{Key: f.old.stateKey("count", []byte(k)), Value: binary.LittleEndian.AppendUint64(nil, f.want[k])})
		f.nw.klt.Add(1, []byte(k), "count-0")
	}
	f.nw.klt.Add(1, []byte(f.keys[0]), "count-0")
	if err := f.old.store.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	f.owner = &hookStore{Store: f.old.store}
	f.old.store = f.owner
	f.nw.owners.Store("count-0", control.TaskRef{ID: "count-0", WorkerID: "w1"})
	f.nw.gradual = gradual
	f.nw.mig.t = c.tasks["count-1"]
	f.nw.mig.mu.Lock()
	f.nw.mig.running = true
	f.nw.mig.mu.Unlock()
	t.Cleanup(func() { // before the cluster's: no goroutine to wait for
		f.nw.mig.mu.Lock()
		if f.nw.mig.exited == nil {
			f.nw.mig.running = false
		}
		f.nw.mig.mu.Unlock()
	})
	return f
}

// count processes a batch of keys on count-1 and notes the counts.
func (f *migratorFixture) count(t *testing.T, keys ...string) {
	t.Helper()
	tk := f.c.tasks["count-1"]
	recs := make([]Record, len(keys))
	for i, k := range keys {
		recs[i] = Record{Key: []byte(k)}
		f.want[k]++
	}
	fr := &wire.Frame{Kind: wire.FrameData, JobID: f.c.dep.Job.JobID, FromTask: "source-0", ToTask: tk.id, Records: recs}
	if err := tk.handleSettled(context.Background(), fr); err != nil {
		t.Fatal(err)
	}
}

func (f *migratorFixture) chunk(t *testing.T) bool {
	t.Helper()
	_, ok, err := f.nw.mig.backgroundChunk(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// values reads key's count on task ks (0: absent).
func values(t *testing.T, ks *keyedState, keys ...string) map[string]uint64 {
	t.Helper()
	skeys := make([][]byte, len(keys))
	for i, k := range keys {
		skeys[i] = ks.stateKey("count", []byte(k))
	}
	vals, err := ks.store.MultiGet(skeys)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for i, v := range vals {
		if v != nil {
			out[keys[i]] = binary.LittleEndian.Uint64(v)
		}
	}
	return out
}

// finish runs chunks until the table is empty and checks that every key
// has its count on count-1 and none is left on count-0.
func (f *migratorFixture) finish(t *testing.T) {
	t.Helper()
	for i := 0; f.chunk(t); i++ {
		if i == 1000 {
			t.Fatalf("%d lookup entries left after 1000 chunks", f.nw.klt.Len())
		}
	}
	if n := f.nw.klt.Len(); n != 0 {
		t.Fatalf("%d lookup entries left", n)
	}
	if got := values(t, f.nw, f.keys...); !maps.Equal(got, f.want) {
		t.Fatalf("new owner holds %v, want %v", got, f.want)
	}
	if left := values(t, f.old, f.keys...); len(left) != 0 {
		t.Fatalf("old owner still holds %v", left)
	}
	if len(f.nw.mig.claims) != 0 || len(f.nw.mig.committed) != 0 {
		t.Fatalf("%d claims and %d committed keys left", len(f.nw.mig.claims), len(f.nw.mig.committed))
	}
}

// TestBackgroundPullRacesBatch: a batch needs a key after a background
// peek has read its value and before the chunk is committed. The batch
// takes the key from its owner itself (it is moved once), the commit
// skips it, so the peeked value — older than what the batch wrote — is
// never stored, and only the batch's take drops a lookup entry of it (the
// duplicate entry stays, as a colliding key's would).
func TestBackgroundPullRacesBatch(t *testing.T) {
	f := newMigratorFixture(t, t.TempDir(), 12, 4)
	k := f.keys[0] // in the first chunk: keys come in key order
	fired := false
	f.owner.onGet = func(n int) {
		if n == 1 { // the peek has read the chunk's values
			fired = true
			f.count(t, k)
		}
	}
	if !f.chunk(t) || !fired {
		t.Fatalf("no chunk, or the peek did not read through the owner's store (fired %v)", fired)
	}
	f.owner.onGet = nil
	if got := values(t, f.nw, k)[k]; got != f.want[k] {
		t.Fatalf("%s holds %d after the chunk, want %d: the peeked value overwrote the batch's", k, got, f.want[k])
	}
	if _, listed := f.nw.klt.Lookup([]byte(k)); !listed {
		t.Fatalf("both entries of %s are gone: the commit dropped one of a key it did not move", k)
	}
	if got := values(t, f.nw, f.keys[1:4]...); len(got) != 3 {
		t.Fatalf("the chunk's other keys are not here: %v", got)
	}
	if left := values(t, f.old, f.keys[:4]...); len(left) != 0 {
		t.Fatalf("the chunk's keys are still on the old owner: %v", left)
	}
	f.count(t, k) // the duplicate entry: a fetch finds nothing, the local value counts on
	f.finish(t)
}

// TestBackgroundCommitBeforeDrop: between a chunk's commit and its drop a
// batch counts a committed key that the table still lists (its duplicate
// entry, as a colliding key's would be): it is local — no fetch from the
// old owner, which still holds the copy and whose take would drop the
// colliding key's entry — and counted on from the committed value.
func TestBackgroundCommitBeforeDrop(t *testing.T) {
	f := newMigratorFixture(t, t.TempDir(), 12, 4)
	k := f.keys[0]
	during, after := -1, -1
	f.owner.setOnPut(func([]statesvc.KV) { // the drop's delete: the old owner's only write here
		f.owner.setOnPut(nil)
		during = f.owner.calls()
		f.count(t, k)
		after = f.owner.calls()
	})
	if !f.chunk(t) || during < 0 {
		t.Fatal("no drop through the owner's store")
	}
	if after != during {
		t.Fatalf("a batch fetched the committed key %s from the old owner (%d reads before, %d after)", k, during, after)
	}
	if got := values(t, f.nw, k)[k]; got != f.want[k] {
		t.Fatalf("%s holds %d, want %d", k, got, f.want[k])
	}
	if _, listed := f.nw.klt.Lookup([]byte(k)); !listed {
		t.Fatalf("the duplicate entry of %s is gone", k)
	}
	f.finish(t)
}

// TestCheckpointAroundBackgroundChunk writes the new owner's part of a
// checkpoint inside a background chunk — after the peek, before the
// commit (cp-1), and after the commit, before the drop (cp-2) — and the
// old owner's part after the drop: restoring each puts every key in
// exactly one task with its count at the cut, the keys of the chunk
// coming from the old owner's served log or from the new owner's store.
func TestCheckpointAroundBackgroundChunk(t *testing.T) {
	store := t.TempDir()
	f := newMigratorFixture(t, store, 12, 4)
	own := keysInBuckets(1, false)[0] // count-0's own key
	if err := f.old.store.MultiPut([]statesvc.KV{{Key: f.old.stateKey("count", []byte(own)), Value: binary.LittleEndian.AppendUint64(nil, 7)}}); err != nil {
		t.Fatal(err)
	}
	cut := func() map[string]uint64 {
		m := maps.Clone(f.want)
		m[own] = 7
		return m
	}
	var want1, want2 map[string]uint64
	f.owner.onGet = func(n int) {
		if n == 1 {
			if ack := f.c.part(t, "count-1", "cp-000001"); ack.Error != "" {
				t.Errorf("new owner's part 1: %s", ack.Error)
			}
			want1 = cut()
		}
	}
	if !f.chunk(t) {
		t.Fatal("no chunk")
	}
	if ack := f.c.part(t, "count-0", "cp-000001"); ack.Error != "" {
		t.Fatalf("old owner's part 1: %s", ack.Error)
	}
	f.owner.onGet = nil
	f.count(t, f.keys[0], f.keys[5])       // one moved in the chunk, one still remote
	f.owner.setOnPut(func([]statesvc.KV) { // the drop, after the commit of the second chunk
		f.owner.setOnPut(nil)
		if ack := f.c.part(t, "count-1", "cp-000002"); ack.Error != "" {
			t.Errorf("new owner's part 2: %s", ack.Error)
		}
		want2 = cut()
	})
	// The second chunk takes keys 4-7; key 5 was taken by the batch.
	if !f.chunk(t) {
		t.Fatal("no second chunk")
	}
	if ack := f.c.part(t, "count-0", "cp-000002"); ack.Error != "" {
		t.Fatalf("old owner's part 2: %s", ack.Error)
	}
	if want1 == nil || want2 == nil {
		t.Fatal("a part was not written inside its chunk")
	}
	f.finish(t)
	for _, tc := range []struct {
		cp   string
		want map[string]uint64
	}{{"cp-000001", want1}, {"cp-000002", want2}} {
		got, where := restoredCounts(t, store, tc.cp)
		if !maps.Equal(got, tc.want) {
			t.Errorf("restored %s: %v, want %v", tc.cp, got, tc.want)
		}
		for k, id := range where {
			if owner := fmt.Sprintf("count-%d", statesvc.BucketOf([]byte(k), kltCkptBuckets)%2); id != owner {
				t.Errorf("restored %s: key %s in %s, its bucket's owner is %s", tc.cp, k, id, owner)
			}
		}
	}
}

// TestBackgroundMigrationUnderLoad runs the migrator goroutine for real
// (small chunks, a budget high enough not to pause) while the test, as
// the task goroutine, processes batches of random moved and local keys:
// every count ends exact, nothing stays on the old owner, and the
// "migrated" event comes once the table is empty.
func TestBackgroundMigrationUnderLoad(t *testing.T) {
	f := newMigratorFixture(t, t.TempDir(), 600, 8)
	f.nw.mig.mu.Lock()
	f.nw.mig.running = false // the real goroutine now
	f.nw.mig.mu.Unlock()
	f.nw.mode = control.ModeEventual
	f.nw.mig.rate = control.MaxMigrationRate
	f.nw.setPending("reconfig-1")
	local := keysInBucket(3, 50) // count-1's own bucket
	for _, k := range local {
		f.want[k] = 0
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tk := f.c.tasks["count-1"]
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	batches := 0
	for tk.keyed.lastMigrated.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no migrated event after 60 s and %d batches; %d entries left", batches, f.nw.klt.Len())
		}
		var keys []string
		for range 20 {
			if rng.IntN(2) == 0 {
				keys = append(keys, f.keys[rng.IntN(len(f.keys))])
			} else {
				keys = append(keys, local[rng.IntN(len(local))])
			}
		}
		f.count(t, keys...)
		batches++
		if err := tk.afterBatch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := tk.err(); err != nil {
		t.Fatal(err)
	}
	if n := f.nw.klt.Len(); n != 0 {
		t.Fatalf("migrated event with %d lookup entries left", n)
	}
	f.nw.mig.close()
	all := append(slices.Clone(f.keys), local...)
	got := values(t, f.nw, all...)
	for _, k := range all {
		if got[k] != f.want[k] {
			t.Errorf("%s counted %d, want %d", k, got[k], f.want[k])
		}
	}
	if left := values(t, f.old, f.keys...); len(left) != 0 {
		t.Fatalf("old owner still holds %d keys", len(left))
	}
	t.Logf("%d batches while the migrator moved %d keys", batches, len(f.keys))
}

// TestBackgroundMigrationHottestFirst: of the buckets still to move, a
// background chunk pulls from the one that received the most records here
// (the task's per-bucket counts), and follows the counts as they change.
func TestBackgroundMigrationHottestFirst(t *testing.T) {
	f := newMigratorFixture(t, t.TempDir(), 8, 4)
	cold := f.keys // bucket 1
	hot := keysInBucket(5, 8)
	var kvs []statesvc.KV
	for i, k := range hot {
		f.want[k] = uint64(1000 + i)
		kvs = append(kvs, statesvc.KV{Key: f.old.stateKey("count", []byte(k)), Value: binary.LittleEndian.AppendUint64(nil, f.want[k])})
		f.nw.klt.Add(5, []byte(k), "count-0")
	}
	if err := f.old.store.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	f.keys = append(slices.Clone(cold), hot...)
	tk := f.c.tasks["count-1"]
	counts := make([]atomic.Uint64, kltCkptBuckets)
	counts[1].Store(10)
	counts[5].Store(100)
	tk.bucketIn.Store(&counts)
	moved := func(keys []string) int { return len(values(t, f.nw, keys...)) }
	if !f.chunk(t) {
		t.Fatal("no chunk")
	}
	if got, gotCold := moved(hot), moved(cold); got != 4 || gotCold != 0 {
		t.Fatalf("first chunk moved %d keys of the hot bucket and %d of the cold one, want 4 and 0", got, gotCold)
	}
	counts[1].Store(1000) // bucket 1 turns hot
	if !f.chunk(t) {
		t.Fatal("no chunk")
	}
	if got, gotHot := moved(cold), moved(hot); got != 4 || gotHot != 4 {
		t.Fatalf("second chunk: %d keys of bucket 1 and %d of bucket 5 here, want 4 and 4", got, gotHot)
	}
	f.finish(t)
}

// TestMigratedWaitsForTheLastDrop: the last chunk empties the table at
// its commit; until its drop has deleted the keys on the old owner (which
// may be a removed task, stopped once it hears), afterBatch reports no
// "migrated" event — then it does.
func TestMigratedWaitsForTheLastDrop(t *testing.T) {
	f := newMigratorFixture(t, t.TempDir(), 4, 4)
	f.nw.klt.RemoveKeys("count-0", [][]byte{[]byte(f.keys[0])}) // no duplicate: the commit empties the table
	f.nw.setPending("reconfig-1")
	tk := f.c.tasks["count-1"]
	ctx := context.Background()
	checked := false
	f.owner.setOnPut(func([]statesvc.KV) { // the drop's delete
		f.owner.setOnPut(nil)
		checked = true
		if n := f.nw.klt.Len(); n != 0 {
			t.Errorf("%d lookup entries at the drop, want 0 (the test needs the table empty here)", n)
		}
		if err := tk.afterBatch(ctx); err != nil {
			t.Error(err)
		}
		if ev := f.nw.lastMigrated.Load(); ev != nil {
			t.Errorf("migrated event before the old owner dropped the keys: %+v", ev)
		}
	})
	if !f.chunk(t) || !checked {
		t.Fatalf("no drop (checked %v)", checked)
	}
	if err := tk.afterBatch(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := f.nw.lastMigrated.Load(); ev == nil || ev.ReconfigID != "reconfig-1" {
		t.Fatalf("no migrated event for reconfig-1 after the last drop: %+v", ev)
	}
	f.finish(t)
}

// TestBatchWaitsForCommitStep: a batch that needs a key while a commit
// step is writing it waits for that write (a store write, not a pull) and
// then counts on from the committed value, without fetching the key from
// the old owner; a batch of other keys does not wait.
func TestBatchWaitsForCommitStep(t *testing.T) {
	f := newMigratorFixture(t, t.TempDir(), 12, 4)
	k := f.keys[1]
	other := keysInBucket(3, 1)[0] // count-1's own bucket
	f.want[other] = 0
	nwStore := &hookStore{Store: f.nw.store}
	f.nw.store = nwStore
	var ownerReads int
	blocked, otherDone := false, false
	count := func(keys ...string) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			recs := make([]Record, len(keys))
			for i, key := range keys {
				recs[i] = Record{Key: []byte(key)}
			}
			fr := &wire.Frame{Kind: wire.FrameData, JobID: f.c.dep.Job.JobID, FromTask: "source-0", ToTask: "count-1", Records: recs}
			if err := f.c.tasks["count-1"].handleSettled(context.Background(), fr); err != nil {
				t.Error(err)
			}
		}()
		return done
	}
	var batch chan struct{}
	nwStore.setOnPut(func(kvs []statesvc.KV) {
		nwStore.setOnPut(nil) // the commit step's write; the batches' own come later
		ownerReads = f.owner.calls()
		select {
		case <-count(other):
			otherDone = true
		case <-time.After(10 * time.Second):
		}
		f.want[other]++
		batch = count(k)
		f.want[k]++
		select {
		case <-batch:
		case <-time.After(200 * time.Millisecond):
			blocked = true // still waiting for this write, as it should
		}
	})
	if !f.chunk(t) {
		t.Fatal("no chunk")
	}
	select {
	case <-batch:
	case <-time.After(10 * time.Second):
		t.Fatal("the batch did not finish after the commit step")
	}
	if !otherDone {
		t.Fatal("a batch of keys outside the commit step waited for it")
	}
	if !blocked {
		t.Fatal("a batch needing a key of the commit step being written did not wait for it")
	}
	if got := values(t, f.nw, k)[k]; got != f.want[k] {
		t.Fatalf("%s holds %d, want %d", k, got, f.want[k])
	}
	// The drop reads nothing: no checkpoint was written, so the served
	// log keeps nothing.
	if n := f.owner.calls(); n != ownerReads {
		t.Fatalf("the old owner served %d reads since the commit step began, want none", n-ownerReads)
	}
	if got := values(t, f.nw, other)[other]; got != f.want[other] {
		t.Fatalf("%s holds %d, want %d", other, got, f.want[other])
	}
	delete(f.want, other)
	f.finish(t)
}
