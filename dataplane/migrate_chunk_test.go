package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/statesvc"
)

// scanCounter counts the ordered key listings of a store's given-away
// buckets and remembers where each started: an owner serves each bucket
// pull with exactly one, starting where the previous pull of the bucket
// stopped.
type scanCounter struct {
	statesvc.Store
	mu     sync.Mutex
	starts [][]byte
}

func (s *scanCounter) FrozenKeys(ranges []statesvc.KeyRange) (statesvc.KeyLister, error) {
	l, err := statesvc.FrozenKeys(s.Store, ranges)
	return countedLister{l, s}, err
}

type countedLister struct {
	statesvc.KeyLister
	s *scanCounter
}

func (l countedLister) Keys(from, end []byte, fn func(k []byte) bool) error {
	l.s.mu.Lock()
	l.s.starts = append(l.s.starts, append([]byte(nil), from...))
	l.s.mu.Unlock()
	return l.KeyLister.Keys(from, end, fn)
}

func (s *scanCounter) scans() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.starts)
}

// TestMigrationChunks moves two buckets of 5000 keys each (more than one
// 4096-key page) from an old owner, in the background (the migrator,
// started by afterBatch as after any batch) and on the task goroutine
// (migrateChunk, one call per chunk), and counts the owner's bucket pulls.
// -1 is all at once: pages of allAtOncePage keys; a positive size is that
// many keys per pull. Each pull of a bucket after its first starts past
// the previous one's keys, never at the bucket's start again. Every value
// ends up on the new owner and none on the old, the table is empty, and
// the "migrated" event fires once the last chunk's keys are gone from the
// old owner.
func TestMigrationChunks(t *testing.T) {
	cases := []migrationChunksCase{
		{name: "all at once", gradual: -1, wantPulls: 2 * 2},                    // a page of 4096 and 904 keys
		{name: "all at once, paged", gradual: -1, page: 1200, wantPulls: 2 * 5}, // 4 full pages and 200 keys
		{name: "chunks of 1200", gradual: 1200, wantPulls: 2 * 5},
		{name: "chunks of 4096", gradual: 4096, wantPulls: 2 * 2},
		// The buckets moving back to the old owner: its view owns them
		// already while the task pulling from it has not yet handed them
		// back (their records wait at its gate meanwhile).
		{name: "moving back", gradual: 1200, wantPulls: 2 * 5, ownerOwns: true},
	}
	for _, backend := range []string{statesvc.BackendMemory, statesvc.BackendPebble} {
		for _, background := range []bool{true, false} {
			for _, tc := range cases {
				t.Run(fmt.Sprintf("%s/%s/background=%v", backend, tc.name, background), func(t *testing.T) {
					tc.run(t, backend, background)
				})
			}
		}
	}
}

// migrationChunksCase is a case of TestMigrationChunks: two buckets of
// 5000 keys, moved in chunks of gradual keys (pages of page keys when
// gradual is -1; 0: allAtOncePage), in wantPulls pulls.
type migrationChunksCase struct {
	name      string
	gradual   int
	page      int
	wantPulls int
	ownerOwns bool // the routing gives the buckets to the old owner
}

func (tc migrationChunksCase) run(t *testing.T, backend string, background bool) {
	const buckets, perBucket = 2, 5000
	owner, gainer := newMigrationPair(t, buckets, tc.gradual, backend, tc.ownerOwns)
	if tc.page > 0 {
		gainer.keyed.pullPage = tc.page
	}
	counter := &scanCounter{Store: owner.keyed.store}
	owner.keyed.store = counter

	keys := keysPerBucket(buckets, perBucket)
	var kvs []statesvc.KV
	for i, k := range keys {
		kvs = append(kvs, statesvc.KV{Key: owner.keyed.stateKey("count", k), Value: binary.LittleEndian.AppendUint64(nil, uint64(i))})
		gainer.keyed.klt.Add(statesvc.BucketOf(k, buckets), k, owner.id)
	}
	if err := counter.Store.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	gainer.keyed.owners.Store(owner.id, control.TaskRef{ID: owner.id, WorkerID: "w1"})
	gainer.keyed.setPending("reconfig-1")

	ctx := context.Background()
	if background {
		if err := gainer.afterBatch(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for gainer.keyed.lastMigrated.Load() == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no migrated event after 30 s; %d lookup entries left, error %v", gainer.keyed.klt.Len(), gainer.err())
			}
			time.Sleep(5 * time.Millisecond)
			if err := gainer.afterBatch(ctx); err != nil { // the idle tick's
				t.Fatal(err)
			}
		}
	} else {
		for steps := 0; gainer.keyed.klt.Len() > 0; steps++ {
			if steps == 1000 {
				t.Fatalf("%d lookup entries left after %d steps", gainer.keyed.klt.Len(), steps)
			}
			if err := gainer.migrateChunk(ctx, tc.gradual); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := gainer.err(); err != nil {
		t.Fatal(err)
	}
	starts := counter.scans()
	if len(starts) != tc.wantPulls {
		t.Errorf("owner served %d bucket pulls, want %d", len(starts), tc.wantPulls)
	}
	firsts := 0
	for i, s := range starts {
		b := -1
		for bk := range buckets {
			if lo, hi := statesvc.BucketRange("count", bk, bk+1); bytes.Compare(s, lo) >= 0 && bytes.Compare(s, hi) < 0 {
				b = bk
			}
		}
		bucketStart, _ := statesvc.BucketRange("count", b, b+1)
		switch {
		case b < 0:
			t.Fatalf("pull %d started at %q, outside the buckets", i, s)
		case bytes.Equal(s, bucketStart):
			firsts++
		case i == 0 || bytes.Compare(s, starts[i-1]) <= 0:
			t.Errorf("pull %d of bucket %d started at %q, not past the previous pull's start %q", i, b, s, starts[i-1])
		}
	}
	if firsts != buckets {
		t.Errorf("%d pulls started at a bucket's start, want one per bucket (%d): later pulls rescan the taken keys", firsts, buckets)
	}
	for _, c := range []struct {
		task *task
		want func(i int) []byte
	}{
		{gainer, func(i int) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(i)) }},
		{owner, func(int) []byte { return nil }},
	} {
		skeys := make([][]byte, len(keys))
		for i, k := range keys {
			skeys[i] = c.task.keyed.stateKey("count", k)
		}
		vals, err := c.task.keyed.store.MultiGet(skeys)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if string(v) != string(c.want(i)) {
				t.Fatalf("task %s: key %s holds %x, want %x", c.task.id, keys[i], v, c.want(i))
			}
		}
	}
	if n := gainer.keyed.klt.Len(); n != 0 {
		t.Errorf("%d lookup entries left", n)
	}
	if background {
		ev := gainer.keyed.lastMigrated.Load()
		var want uint64 // user key and value of every key
		for _, k := range keys {
			want += uint64(len(k) + 8)
		}
		if ev.Bytes != want {
			t.Errorf("migrated event reports %d bytes, want %d", ev.Bytes, want)
		}
	}
}

// newMigrationPair creates (without starting) the two tasks of a keyed
// counter on one worker, state in backend, migrating in the background
// with batch size gradual; the gainer owns every bucket, or with
// ownerOwns the old owner does.
func newMigrationPair(t *testing.T, buckets, gradual int, backend string, ownerOwns bool) (owner, gainer *task) {
	t.Helper()
	return newCounterPair(t, "gradual", buckets, backend, ownerOwns,
		map[string]string{control.ParamMigrationMode: control.ModeEventual, control.ParamGradualBatchSize: strconv.Itoa(gradual)})
}

// newCounterPair creates (without starting) the two tasks of a keyed
// counter named job on one worker, with state in backend (a Pebble store
// lives under the test's temporary directory); the gainer owns every
// bucket, or with ownerOwns the old owner does.
func newCounterPair(tb testing.TB, job string, buckets int, backend string, ownerOwns bool, params map[string]string) (owner, gainer *task) {
	tb.Helper()
	q := NewQuery(job)
	q.Source("source", 1).KeyedStateful("count", []string{"count"}, func(r Record, st *State, emit Emit) error {
		emit(r)
		return nil
	}).Parallelism(2).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		tb.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: tb.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	spec := control.JobSpec{JobID: job, Operators: ops, NumBuckets: buckets, BatchSize: 100, StateBackend: backend, Params: params}
	dep := control.Deployment{Job: spec, Epoch: 1}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		table := make([]int, buckets)
		if op.Name == "count" && !ownerOwns {
			for b := range table {
				table[b] = 1 // the gainer's, count-1
			}
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: table})
	}
	var made []*task
	for _, ref := range dep.Tasks {
		if ref.Operator != "count" {
			continue
		}
		tk, err := w.createTask(dep, ref, nil)
		if err != nil {
			tb.Fatal(err)
		}
		w.tasks[tk.key()] = tk
		made = append(made, tk)
	}
	tb.Cleanup(func() {
		for _, tk := range made {
			_ = tk.stop(context.Background())
		}
	})
	return made[0], made[1]
}

// keysPerBucket returns n keys of each of the buckets, bucket by bucket.
func keysPerBucket(buckets, n int) [][]byte {
	by := make([][][]byte, buckets)
	for i, full := 0, 0; full < buckets; i++ {
		k := []byte(fmt.Sprintf("key-%d", i))
		b := statesvc.BucketOf(k, buckets)
		if len(by[b]) == n {
			continue
		}
		if by[b] = append(by[b], k); len(by[b]) == n {
			full++
		}
	}
	var out [][]byte
	for _, ks := range by {
		out = append(out, ks...)
	}
	return out
}
