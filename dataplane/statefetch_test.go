package dataplane

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// TestFetchOfAbsentKeyIsHarmless checks the fetch path against the key
// lookup table's false positives: a table entry naming an owner that does
// not hold the key (as a hash collision produces) must cost one wasted
// fetch and nothing else — the key's local value is used, the entry is
// kept (its hash may stand for another key that is still remote) — while
// a real remote key is taken from its owner and its entry dropped.
func TestFetchOfAbsentKeyIsHarmless(t *testing.T) {
	var mu sync.Mutex
	got := map[string]uint64{}
	q := NewQuery("fp-fetch")
	q.Source("source", 1).KeyedStateful("count", []string{"count"}, countPerKey).Parallelism(2).SinkFunc("sink", func(in []Record) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range in {
			got[string(r.Key)] = binary.LittleEndian.Uint64(r.Value)
		}
		return nil
	})
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	const buckets = 16
	w := &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	job := control.JobSpec{JobID: "fp-fetch", Operators: ops, NumBuckets: buckets, BatchSize: 100, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand}} // no background pulls until asked
	dep := control.Deployment{Job: job, Epoch: 1}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: make([]int, buckets)}) // all on task 0
	}
	tasks := createTasks(t, w, dep)
	ctx, cancel := context.WithCancel(context.Background())
	sink, owner, other := tasks[control.TaskID("sink", 0)], tasks[control.TaskID("count", 0)], tasks[control.TaskID("count", 1)]
	sink.start(ctx)
	t.Cleanup(func() {
		cancel()
		for _, tk := range tasks {
			_ = tk.stop(context.Background())
		}
	})

	counter := func(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }
	local, remote, fresh := []byte("local-key"), []byte("remote-key"), []byte("new-key")
	ks := owner.keyed
	// local-key: value 5 here, but the table (wrongly) names count-1.
	// remote-key: value 7 on count-1, rightly named.
	if err := ks.store.MultiPut([]statesvc.KV{{Key: ks.stateKey("count", local), Value: counter(5)}}); err != nil {
		t.Fatal(err)
	}
	if err := other.keyed.store.MultiPut([]statesvc.KV{{Key: other.keyed.stateKey("count", remote), Value: counter(7)}}); err != nil {
		t.Fatal(err)
	}
	otherRef := control.TaskRef{ID: other.id, WorkerID: "w1"}
	ks.owners.Store(other.id, otherRef)
	ks.klt.Add(statesvc.BucketOf(local, buckets), local, other.id)
	ks.klt.Add(statesvc.BucketOf(remote, buckets), remote, other.id)

	f := &wire.Frame{Kind: wire.FrameData, JobID: job.JobID, FromTask: control.TaskID("source", 0), ToTask: owner.id, Records: []Record{
		{Key: local, Offset: 0}, {Key: remote, Offset: 1}, {Key: fresh, Offset: 2},
	}}
	if err := owner.handleSettled(ctx, f); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink got %d of 3 keys", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := map[string]uint64{"local-key": 6, "remote-key": 8, "new-key": 1}
	mu.Lock()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s counted %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	mu.Unlock()
	if n := ks.klt.Len(); n != 1 {
		t.Errorf("lookup table holds %d entries, want 1 (the false positive's, kept)", n)
	}
	if o, ok := ks.klt.Lookup(remote); ok {
		t.Errorf("remote-key still listed under %s after it was taken", o)
	}
	vals, err := other.keyed.store.MultiGet([][]byte{other.keyed.stateKey("count", remote)})
	if err != nil || vals[0] != nil {
		t.Errorf("remote-key left on its old owner: %q, %v", vals[0], err)
	}
	// A bucket pull finds nothing more on count-1 and drops the entry; the
	// local value stays.
	if err := owner.migrateChunk(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if n := ks.klt.Len(); n != 0 {
		t.Errorf("after the pull the table holds %d entries, want 0", n)
	}
	vals, err = ks.store.MultiGet([][]byte{ks.stateKey("count", local)})
	if err != nil || len(vals[0]) != 8 || binary.LittleEndian.Uint64(vals[0]) != 6 {
		t.Errorf("local-key after the pull: %q, %v; want 6", vals[0], err)
	}
}
