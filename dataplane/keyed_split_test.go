package dataplane

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// seqFixture: a source, a keyed "seq" operator of two tasks (each key's
// state is its records' values appended in order, and each record goes
// on) and a sink task, none started; every bucket routes to seq-1, which
// gained seq-0's keys by fetch on demand.
func seqFixture(t *testing.T) (old, nw, sink *task, job control.JobSpec) {
	t.Helper()
	const buckets = kltCkptBuckets
	q := NewQuery("split")
	q.Source("source", 1).KeyedStateful("seq", []string{"seq"}, func(r Record, st *State, emit Emit) error {
		st.Put("seq", r.Key, append(slices.Clone(st.Get("seq", r.Key)), r.Value...))
		emit(r)
		return nil
	}).Parallelism(2).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	job = control.JobSpec{JobID: "split", Operators: ops, NumBuckets: buckets, BatchSize: 100, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand}}
	dep := control.Deployment{Job: job, Epoch: 1}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		table := make([]int, buckets)
		if op.Name == "seq" {
			for b := range table {
				table[b] = 1 // all count-1's: it gained count-0's keys
			}
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: table})
	}
	tasks := map[string]*task{}
	for _, ref := range dep.Tasks {
		if ref.Operator == "source" {
			continue
		}
		tk, err := w.createTask(dep, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.tasks[tk.key()] = tk
		tasks[ref.ID] = tk
	}
	t.Cleanup(func() {
		for _, tk := range tasks {
			_ = tk.stop(context.Background())
		}
	})
	return tasks["seq-0"], tasks["seq-1"], tasks["sink-0"], job
}

// TestLocalRecordsDoNotWaitForFetch: a batch mixes records of two local
// keys with records of a key still on its old owner. While the fetch of
// that key is held up, the local keys' records are already processed,
// their state written and their output sent to the next task; then the
// held records follow, each key's records in their order (the operator
// appends each record's value to its key's state).
func TestLocalRecordsDoNotWaitForFetch(t *testing.T) {
	old, nw, sink, job := seqFixture(t)
	keys := keysInBucket(1, 3)
	remote, l1, l2 := keys[0], keys[1], keys[2]
	if err := old.keyed.store.MultiPut([]statesvc.KV{{Key: old.keyed.stateKey("seq", []byte(remote)), Value: []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	nw.keyed.owners.Store("seq-0", control.TaskRef{ID: "seq-0", WorkerID: "w1"})
	nw.keyed.klt.Add(1, []byte(remote), "seq-0")
	owner := &hookStore{Store: old.keyed.store}
	old.keyed.store = owner

	seqOf := func(key string) string {
		v, err := nw.keyed.store.MultiGet([][]byte{nw.keyed.stateKey("seq", []byte(key))})
		if err != nil {
			t.Fatal(err)
		}
		return string(v[0])
	}
	sent := func() (out []string) {
		for {
			select {
			case f := <-sink.inbox:
				sink.taken(f) // as nextFrame does: the frame leaves the inbox
				for _, r := range f.Records {
					out = append(out, string(r.Key)+"="+string(r.Value))
				}
			default:
				return out
			}
		}
	}
	checked := false
	var got []string // records the next task received
	// The fetch of the remote key, held up here until the local part is done.
	owner.onGet = func(n int) {
		checked = true
		want := []string{l1 + "=1", l1 + "=3", l2 + "=4", l2 + "=6"}
		for deadline := time.Now().Add(10 * time.Second); ; {
			got = append(got, sent()...)
			if seqOf(l1)+","+seqOf(l2) == "13,46" && len(got) >= len(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("while the fetch is out, the local keys hold %q (want %q) and the next task got %q: they waited for it", seqOf(l1)+","+seqOf(l2), "13,46", got)
				return
			}
			time.Sleep(time.Millisecond)
		}
		if !slices.Equal(got, want) {
			t.Errorf("while the fetch is out, the next task got %q, want the local keys' records %q", got, want)
		}
		if v := seqOf(remote); v != "" {
			t.Errorf("the remote key holds %q here before its fetch returned", v)
		}
		got = nil
	}
	f := &wire.Frame{Kind: wire.FrameData, JobID: job.JobID, FromTask: "source-0", ToTask: nw.id, Records: []Record{
		{Key: []byte(l1), Value: []byte("1")}, {Key: []byte(remote), Value: []byte("2")}, {Key: []byte(l1), Value: []byte("3")},
		{Key: []byte(l2), Value: []byte("4")}, {Key: []byte(remote), Value: []byte("5")}, {Key: []byte(l2), Value: []byte("6")},
	}}
	if err := nw.handleSettled(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the batch fetched nothing from the old owner")
	}
	if got := seqOf(remote); got != "025" {
		t.Fatalf("the remote key holds %q, want %q (its old value, then its records in order)", got, "025")
	}
	if got, want := append(got, sent()...), []string{remote + "=2", remote + "=5"}; !slices.Equal(got, want) {
		t.Fatalf("after the fetch the next task got %q, want %q", got, want)
	}
	if n := nw.keyed.klt.Len(); n != 0 {
		t.Fatalf("%d lookup entries left after the key was taken", n)
	}
}

// handleSettled is handleFrame, then what the task's loop does once its
// inbox is empty and the fetches it waits for return: the records they
// held are processed. Tests that drive a task frame by frame use it to
// see each batch whole.
func (t *task) handleSettled(ctx context.Context, f *wire.Frame) error {
	if err := t.handleFrame(ctx, f); err != nil {
		return err
	}
	if t.keyed == nil {
		return nil
	}
	if t.keyed.pipe.active() {
		if err := t.outsideBatch(ctx, t.drainFetches); err != nil {
			return err
		}
	}
	return t.releaseFrames(ctx)
}
