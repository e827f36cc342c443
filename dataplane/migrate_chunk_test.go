package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/statesvc"
)

// scanCounter counts the scans of a store: an owner serves each bucket
// pull with exactly one.
type scanCounter struct {
	statesvc.Store
	scans atomic.Int64
}

func (s *scanCounter) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	s.scans.Add(1)
	return s.Store.Scan(start, end, fn)
}

// TestProgressiveMigrationBatchSize moves two buckets of 5000 keys each
// (more than one 4096-key chunk) from an old owner with the progressive
// migration's steps (afterBatch, run after every batch and idle tick) and
// counts the steps and the owner's bucket pulls. -1 is all at once: one
// step per bucket, in back-to-back pages of allAtOncePage keys; a
// positive size is one pull of that many keys per step.
func TestProgressiveMigrationBatchSize(t *testing.T) {
	const buckets, perBucket = 2, 5000
	cases := []struct {
		name      string
		gradual   int
		page      int // 0: the default (allAtOncePage)
		wantSteps int
		wantPulls int
	}{
		{name: "all at once", gradual: -1, wantSteps: buckets, wantPulls: buckets * 2},                    // a page of 4096 and 904 keys
		{name: "all at once, paged", gradual: -1, page: 1200, wantSteps: buckets, wantPulls: buckets * 5}, // 4 full pages and 200 keys
		{name: "chunks of 1200", gradual: 1200, wantSteps: buckets * 5, wantPulls: buckets * 5},
		{name: "chunks of 4096", gradual: 4096, wantSteps: buckets * 2, wantPulls: buckets * 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			owner, gainer := newMigrationPair(t, buckets, tc.gradual)
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

			ctx := context.Background()
			steps := 0
			for gainer.keyed.klt.Len() > 0 {
				if steps == 1000 {
					t.Fatalf("%d lookup entries left after %d steps", gainer.keyed.klt.Len(), steps)
				}
				if err := gainer.afterBatch(ctx); err != nil {
					t.Fatal(err)
				}
				steps++
			}
			if steps != tc.wantSteps {
				t.Errorf("migration took %d steps, want %d", steps, tc.wantSteps)
			}
			if n := counter.scans.Load(); n != int64(tc.wantPulls) {
				t.Errorf("owner served %d bucket pulls, want %d", n, tc.wantPulls)
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
		})
	}
}

// newMigrationPair creates (without starting) the two tasks of a keyed
// counter on one worker, in-memory state, migrating in the background
// with batch size gradual.
func newMigrationPair(t *testing.T, buckets, gradual int) (owner, gainer *task) {
	t.Helper()
	return newCounterPair(t, "gradual", buckets, statesvc.BackendMemory,
		map[string]string{control.ParamMigrationMode: control.ModeEventual, control.ParamGradualBatchSize: strconv.Itoa(gradual)})
}

// newCounterPair creates (without starting) the two tasks of a keyed
// counter named job on one worker, with state in backend (a Pebble store
// lives under the test's temporary directory).
func newCounterPair(tb testing.TB, job string, buckets int, backend string, params map[string]string) (owner, gainer *task) {
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
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: make([]int, buckets)})
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
