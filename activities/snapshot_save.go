package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"koala/dataplane/control"
)

// SnapshotManifestFile is the manifest written at the top of a snapshot
// directory, next to one directory per task.
const SnapshotManifestFile = "manifest.json"

// SnapshotManifest describes a job's state snapshot: enough to check that
// a job it is loaded into has the same shape, and the warm-up it came from.
type SnapshotManifest struct {
	Query      string             `json:"query"`
	JobID      string             `json:"job_id"` // the job whose state it is
	CreatedAt  time.Time          `json:"created_at"`
	NumBuckets int                `json:"num_buckets"`
	NumEvents  int64              `json:"num_events"` // per producer, of the warm-up
	Producers  int                `json:"producers"`
	Generator  string             `json:"generator"`
	Keys       uint64             `json:"keys"`  // over every operator
	Bytes      uint64             `json:"bytes"` // checkpoint files, over every operator
	Operators  []OperatorSnapshot `json:"operators"`
}

// OperatorSnapshot is one stateful operator of a snapshot.
type OperatorSnapshot struct {
	Operator    string                 `json:"operator"`
	Parallelism int                    `json:"parallelism"`
	BucketTask  []int                  `json:"bucket_task"` // bucket → task index
	Keys        uint64                 `json:"keys"`
	Bytes       uint64                 `json:"bytes"`
	Tasks       []control.TaskSnapshot `json:"tasks"`
}

// SnapshotInput names the job and where its snapshot lives: Dir, or by
// default $KOALA_HOME/snapshots/<Query>/<NumEvents> (see SnapshotDir).
type SnapshotInput struct {
	Deployment control.Deployment `json:"deployment"`
	Dir        string             `json:"dir,omitempty"`
	NumEvents  int64              `json:"num_events"`
	Producers  int                `json:"producers"`
	Generator  string             `json:"generator"`
}

// SnapshotDir resolves a snapshot directory: dir when given, else
// $KOALA_HOME/snapshots/<query>/<numEvents> ($KOALA_HOME defaults to
// ./.koala), made absolute because the workers write and read it.
func SnapshotDir(dir, query string, numEvents int64) (string, error) {
	if dir == "" {
		if numEvents <= 0 {
			return "", fmt.Errorf("snapshot directory: give WarmUpSnapshotDir or the warm-up's NumEvents (> 0, got %d)", numEvents)
		}
		dir = filepath.Join(control.Home(), "snapshots", query, strconv.FormatInt(numEvents, 10))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("snapshot directory %q: %w", dir, err)
	}
	return abs, nil
}

// SnapshotState snapshots every stateful task of the deployment (a Pebble
// checkpoint per task, its buckets and key lookup table; see
// dataplane/snapshot.go) and writes the manifest. The tasks must be idle
// (input drained) for the snapshot to be a consistent cut of the job; each
// store first finishes its pending compactions (snapshotSettle). A
// snapshot is built in a temporary directory and renamed into place, so a
// retried activity starts over and an existing snapshot is never
// overwritten (that is an error naming it).
func (a *Activities) SnapshotState(ctx context.Context, in SnapshotInput) (SnapshotManifest, error) {
	dep := in.Deployment
	m := SnapshotManifest{Query: dep.Job.Query, JobID: dep.Job.JobID, NumBuckets: dep.Job.NumBuckets, NumEvents: in.NumEvents, Producers: in.Producers, Generator: in.Generator}
	dir, err := SnapshotDir(in.Dir, dep.Job.Query, in.NumEvents)
	if err != nil {
		return m, badConfig(err)
	}
	if _, err := os.Stat(dir); err == nil {
		return m, badConfig(fmt.Errorf("snapshot directory %s already exists (remove it to rebuild the warm-up state, or set WarmUpSnapshotDir)", dir))
	}
	tmp := dir + ".partial-" + dep.Job.JobID
	if err := os.RemoveAll(tmp); err != nil {
		return m, fmt.Errorf("snapshot: clear %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return m, fmt.Errorf("snapshot: %w", err)
	}
	defer keepAlive(ctx)()
	order, groups := tasksByWorker(dep, func(t control.TaskRef) bool {
		op, _ := dep.Job.Operator(t.Operator)
		return op.Keyed
	})
	byOp := map[string][]control.TaskSnapshot{}
	for _, wid := range order {
		var reply control.SnapshotReply
		req := control.SnapshotRequest{TaskIDs: groups[wid], Dir: tmp, SettleSeconds: snapshotSettle(ctx).Seconds()}
		if err := a.requestLong(ctx, wid, control.VerbSnapshotSave, dep.Job.JobID, "", req, &reply); err != nil {
			return m, err
		}
		for _, ts := range reply.Tasks {
			byOp[ts.Operator] = append(byOp[ts.Operator], ts)
		}
		heartbeat(ctx, wid)
	}
	if len(byOp) == 0 {
		return m, fmt.Errorf("snapshot: job %s has no stateful task", dep.Job.JobID)
	}
	for _, op := range dep.Job.Operators {
		tasks := byOp[op.Name]
		if len(tasks) == 0 {
			continue
		}
		slices.SortFunc(tasks, func(x, y control.TaskSnapshot) int { return x.Index - y.Index })
		table, _ := dep.Table(op.Name)
		osnap := OperatorSnapshot{Operator: op.Name, Parallelism: len(dep.TasksOf(op.Name)), BucketTask: table.Buckets, Tasks: tasks}
		for _, ts := range tasks {
			osnap.Keys += ts.Keys
			osnap.Bytes += ts.Bytes
		}
		m.Keys += osnap.Keys
		m.Bytes += osnap.Bytes
		m.Operators = append(m.Operators, osnap)
	}
	m.CreatedAt = time.Now().UTC()
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, fmt.Errorf("snapshot manifest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, SnapshotManifestFile), append(data, '\n'), 0o644); err != nil {
		return m, fmt.Errorf("snapshot manifest: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return m, fmt.Errorf("snapshot: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return m, fmt.Errorf("snapshot: move %s into place: %w", tmp, err)
	}
	return m, nil
}

// keepAlive heartbeats every few seconds until the returned function is
// called, so a worker that takes long over one snapshot request (counting
// and checkpointing millions of keys) does not look like a dead activity.
func keepAlive(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				heartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// snapshotSettleMax bounds how long a task's store may compact before its
// snapshot (control.SnapshotRequest.SettleSeconds); snapshotSettleMargin is
// the activity time kept for the checkpoint and the manifest.
const (
	snapshotSettleMax    = 3 * time.Minute
	snapshotSettleMargin = time.Minute
)

// snapshotSettle is how long the next worker's stores may settle: a warm-up
// writes faster than its store compacts, and a snapshot taken at once
// would hand that compaction debt to every run that loads it (see
// statesvc.Pebble.Settle).
func snapshotSettle(ctx context.Context) time.Duration {
	d := snapshotSettleMax
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)-snapshotSettleMargin)
	}
	return max(d, 0)
}
