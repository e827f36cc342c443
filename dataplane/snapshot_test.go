package dataplane_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane/dptest"
	_ "koala/queries"
	"koala/workflows/plan"
)

// TestSnapshotRefusals checks the snapshot verbs' guards: a backend that
// cannot be checkpointed, a load into a running task, a missing snapshot.
func TestSnapshotRefusals(t *testing.T) {
	c := dptest.Start(t, dptest.Options{Workers: 2})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 2, Timeout: 10})
	if err != nil {
		t.Fatal(err)
	}
	deploy := func(jobID, backend string) activities.SnapshotInput {
		t.Helper()
		job, err := acts.BuildJob(ctx, activities.JobInput{
			JobID: jobID, Query: "counter", Parallelism: map[string]int{"counter": 2},
			NumBuckets: 16, BatchSize: 100, Partitions: 2, KafkaBrokers: c.Brokers, StateBackend: backend,
		})
		if err != nil {
			t.Fatal(err)
		}
		dep, err := plan.Initial(job, workers)
		if err != nil {
			t.Fatal(err)
		}
		if err := acts.CreateTopic(ctx, job); err != nil {
			t.Fatal(err)
		}
		if err := acts.DeployTasks(ctx, activities.TasksInput{Deployment: dep}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = acts.StopTasks(context.Background(), activities.TasksInput{Deployment: dep}) })
		return activities.SnapshotInput{Deployment: dep, Dir: filepath.Join(t.TempDir(), "snap"), NumEvents: 1}
	}
	wantErr := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want one containing %q", what, err, want)
		}
	}

	mem := deploy("snap-memory", "memory")
	_, err = acts.SnapshotState(ctx, mem)
	wantErr("snapshot of memory state", err, `state backend "memory" cannot be snapshotted`)

	peb := deploy("snap-pebble", "pebble")
	_, err = acts.LoadSnapshot(ctx, peb)
	wantErr("load of a missing snapshot", err, "build it with a warm-up run")
	if err := acts.StartTasks(ctx, activities.TasksInput{Deployment: peb.Deployment}); err != nil {
		t.Fatal(err)
	}
	if _, err := acts.SnapshotState(ctx, peb); err != nil {
		t.Fatalf("snapshot of an empty running job: %v", err)
	}
	_, err = acts.LoadSnapshot(ctx, peb)
	wantErr("load into running tasks", err, "is already running; state is loaded before a task starts")
}
