package dataplane

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/statesvc"
)

// A started keyed task's status carries its Pebble value cache's counters
// (koala bench reads them to show how much of a large state's reads the
// cache answered); a backend without that cache reports none, nor does a
// task not started yet (a snapshot load may still replace its store).
// The same goes for its state's size (StateBytes).
func TestStatusReportsStateCache(t *testing.T) {
	q := NewQuery("statuscache")
	q.Source("source", 1).KeyedStateful("count", []string{"count"}, func(r Record, st *State, emit Emit) error {
		st.Put("count", r.Key, []byte{1})
		return nil
	}).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, backend := range []string{"pebble", "memory"} {
		jobID := "job-" + backend
		dep := control.Deployment{Job: control.JobSpec{JobID: jobID, Operators: ops, NumBuckets: 8, BatchSize: 10, StateBackend: backend}, Epoch: 1,
			Routing: []control.RoutingTable{{Operator: "count", Epoch: 1, Buckets: make([]int, 8)}}}
		ref := control.TaskRef{ID: control.TaskID("count", 0), Operator: "count", WorkerID: "w1"}
		dep.Tasks = []control.TaskRef{ref}
		tk, err := w.createTask(dep, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.tasks[tk.key()] = tk
		if _, err := tk.keyed.store.MultiGet([][]byte{[]byte("a"), []byte("b")}); err != nil {
			t.Fatal(err)
		}
		if err := tk.keyed.store.MultiPut([]statesvc.KV{{Key: []byte("a"), Value: make([]byte, 1000)}}); err != nil {
			t.Fatal(err)
		}
		st := tk.status(control.TasksRequest{})
		if c := st.StateCache; c != nil {
			t.Errorf("%s: a task not started reports value-cache counters %+v", backend, *c)
		}
		if st.StateBytes != 0 {
			t.Errorf("%s: a task not started reports %d state bytes", backend, st.StateBytes)
		}
		tk.started.Store(true)
		st = tk.status(control.TasksRequest{})
		if st.StateBytes < 1000 {
			t.Errorf("%s: state bytes %d after writing a 1000-byte value, want at least 1000", backend, st.StateBytes)
		}
		c := st.StateCache
		switch {
		case backend == "memory" && c != nil:
			t.Errorf("memory backend reports value-cache counters %+v", *c)
		case backend == "pebble" && (c == nil || c.Lookups != 2 || c.Hits != 0 || c.LimitBytes <= 0):
			t.Errorf("pebble backend: value-cache counters %+v, want 2 lookups, 0 hits and a limit", c)
		}
		if err := w.stopTasks(ctx, jobID, []string{ref.ID}); err != nil {
			t.Fatal(err)
		}
	}
}
