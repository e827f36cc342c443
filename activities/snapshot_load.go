package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
)

// ReadSnapshotManifest reads dir/manifest.json.
func ReadSnapshotManifest(dir string) (SnapshotManifest, error) {
	var m SnapshotManifest
	data, err := os.ReadFile(filepath.Join(dir, SnapshotManifestFile))
	if err != nil {
		return m, fmt.Errorf("snapshot: %w (build it with a warm-up run: \"IsWarmUp\": true)", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("snapshot manifest %s: %w", filepath.Join(dir, SnapshotManifestFile), err)
	}
	return m, nil
}

// CheckSnapshotFits says why the snapshot cannot be loaded into dep, or
// returns nil: same NumBuckets, and for every snapshotted operator the same
// parallelism and bucket → task table. Errors name both values.
func CheckSnapshotFits(m SnapshotManifest, dep control.Deployment) error {
	if m.NumBuckets != dep.Job.NumBuckets {
		return fmt.Errorf("snapshot has NumBuckets %d, the job has NumBuckets %d", m.NumBuckets, dep.Job.NumBuckets)
	}
	for _, op := range m.Operators {
		if _, ok := dep.Job.Operator(op.Operator); !ok {
			return fmt.Errorf("snapshot holds operator %q, which query %q does not have", op.Operator, dep.Job.Query)
		}
		if p := len(dep.TasksOf(op.Operator)); p != op.Parallelism {
			return fmt.Errorf("snapshot has %s parallelism %d, the job has %s parallelism %d", op.Operator, op.Parallelism, op.Operator, p)
		}
		table, _ := dep.Table(op.Operator)
		if !slices.Equal(table.Buckets, op.BucketTask) {
			return fmt.Errorf("snapshot of %s assigns buckets to tasks differently from the job's deployment", op.Operator)
		}
	}
	return nil
}

// LoadSnapshot loads a snapshot written by SnapshotState into the
// deployed, not yet started tasks of a job of the same shape (see
// CheckSnapshotFits), and returns its manifest. Loading is idempotent: a
// retried load replaces the state again.
func (a *Activities) LoadSnapshot(ctx context.Context, in SnapshotInput) (SnapshotManifest, error) {
	dep := in.Deployment
	dir, err := SnapshotDir(in.Dir, dep.Job.Query, in.NumEvents)
	if err != nil {
		return SnapshotManifest{}, badConfig(err)
	}
	m, err := ReadSnapshotManifest(dir)
	if err != nil {
		return m, badConfig(err)
	}
	if err := CheckSnapshotFits(m, dep); err != nil {
		return m, badConfig(fmt.Errorf("snapshot %s: %w", dir, err))
	}
	want := map[string]bool{}
	for _, op := range m.Operators {
		want[op.Operator] = true
	}
	defer keepAlive(ctx)()
	order, groups := tasksByWorker(dep, func(t control.TaskRef) bool { return want[t.Operator] })
	for _, wid := range order {
		var reply control.SnapshotReply
		if err := a.requestLong(ctx, wid, control.VerbSnapshotLoad, dep.Job.JobID, "", control.SnapshotRequest{TaskIDs: groups[wid], Dir: dir}, &reply); err != nil {
			return m, err
		}
		heartbeat(ctx, wid)
	}
	for i := range m.Operators {
		for j := range m.Operators[i].Tasks {
			m.Operators[i].Tasks[j].Buckets = nil // keep the workflow history small
		}
		m.Operators[i].BucketTask = nil
	}
	return m, nil
}

// badConfig marks a configuration problem that retrying cannot fix.
func badConfig(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), "BadConfig", err)
}
