package dataplane

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// TestStopTasksRemovesJobDir checks that a worker deletes a job's data
// directory (its tasks' Pebble state) when the last task of that job on it
// stops, and not before: another job's directory, and the directory of a
// job that still has a task here, stay.
func TestStopTasksRemovesJobDir(t *testing.T) {
	q := NewQuery("jobdir")
	q.Source("source", 1).KeyedStateful("count", []string{"count"}, func(r Record, st *State, emit Emit) error {
		st.Put("count", r.Key, []byte{1})
		return nil
	}).Parallelism(2).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	w := &Worker{opts: Options{ID: "w1", DataDir: dataDir}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	deploy := func(jobID string) []string {
		job := control.JobSpec{JobID: jobID, Operators: ops, NumBuckets: 8, BatchSize: 10, StateBackend: "pebble"}
		dep := control.Deployment{Job: job, Epoch: 1}
		var ids []string
		for i := range 2 {
			ref := control.TaskRef{ID: control.TaskID("count", i), Operator: "count", Index: i, WorkerID: "w1"}
			dep.Tasks = append(dep.Tasks, ref)
			ids = append(ids, ref.ID)
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: "count", Epoch: 1, Buckets: make([]int, 8)})
		for _, ref := range dep.Tasks {
			tk, err := w.createTask(dep, ref, nil)
			if err != nil {
				t.Fatal(err)
			}
			w.tasks[tk.key()] = tk
		}
		return ids
	}
	exists := func(jobID string) bool {
		_, err := os.Stat(filepath.Join(dataDir, jobID))
		return err == nil
	}
	a, b := deploy("job-a"), deploy("job-b")
	if !exists("job-a") || !exists("job-b") {
		t.Fatalf("deployed tasks have no data directory under %s", dataDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := w.stopTasks(ctx, "job-a", a[:1]); err != nil {
		t.Fatal(err)
	}
	if !exists("job-a") {
		t.Fatal("job-a's directory was removed while one of its tasks still runs here")
	}
	if err := w.stopTasks(ctx, "job-a", a[1:]); err != nil {
		t.Fatal(err)
	}
	if exists("job-a") {
		t.Error("job-a's directory is still there after its last task here stopped")
	}
	if !exists("job-b") {
		t.Fatal("stopping job-a removed job-b's directory")
	}
	if err := w.stopTasks(ctx, "job-b", b); err != nil {
		t.Fatal(err)
	}
	if exists("job-b") {
		t.Error("job-b's directory is still there after its tasks stopped")
	}
}

func TestRemoveJobDirRefusesPaths(t *testing.T) {
	dataDir := t.TempDir()
	keep := filepath.Join(dataDir, "keep")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: filepath.Join(dataDir, "data")}}
	for _, id := range []string{"", ".", "..", "../keep", `a\b`} {
		if err := w.removeJobDir(id); err == nil {
			t.Errorf("removeJobDir(%q) = nil, want an error naming the job id", id)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a directory outside the data directory was touched: %v", err)
	}
}
