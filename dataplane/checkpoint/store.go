// Package checkpoint owns where checkpoints and snapshots live: the store
// of a job's checkpoints (one directory per task part, an ack per part, a
// manifest that marks a checkpoint complete), its ids, and the file names
// inside a task's snapshot. The runtime writes and restores the parts; the
// controller reads manifests to recover a job.
package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"koala/dataplane/control"
)

// Checkpoint storage.
//
// A checkpoint of a job is one directory per task plus a manifest:
//
//	<store>/<job>/<checkpoint id>/<task>/      the task's part (Pebble checkpoint, sink ledger, …)
//	<store>/<job>/<checkpoint id>/<task>/ack.json   written last by the task
//	<store>/<job>/<checkpoint id>/manifest.json     written last of all: the checkpoint is complete
//
// A checkpoint without a manifest is incomplete and never used for
// recovery. The store is an interface so a shared store (an object store,
// a network file system with another layout) can replace the local
// directory; workers and the controller open the same store from the
// job's ParamCheckpointStore location.

// Files of a checkpoint.
const (
	ManifestFile = "manifest.json"
	AckFile      = "ack.json"
	SinkFile     = "sink.json"
	SourceFile   = "source.json"
)

// Manifest marks a completed checkpoint and is everything
// recovery needs besides the tasks' parts: the deployment the parts belong
// to and where each source partition resumes.
type Manifest struct {
	JobID        string                      `json:"job_id"`
	CheckpointID string                      `json:"checkpoint_id"`
	Seq          int                         `json:"seq"`
	Deployment   control.Deployment          `json:"deployment"`
	Offsets      map[int32]int64             `json:"offsets"`
	Tasks        []control.CheckpointTaskAck `json:"tasks"`
	Bytes        uint64                      `json:"bytes"`
	StartedAt    time.Time                   `json:"started_at"`
	CompletedAt  time.Time                   `json:"completed_at"`
	// DurationMillis runs from the barrier injection to the last task's
	// ack; MaxAlignMillis is the longest alignment of any task.
	DurationMillis float64 `json:"duration_millis"`
	MaxAlignMillis float64 `json:"max_align_millis"`
}

// Store keeps the checkpoints of jobs.
type Store interface {
	// Location is the store's name as given to Open.
	Location() string
	// TaskDir is the local directory a task writes its part into; it does
	// not exist yet (a part is never overwritten).
	TaskDir(jobID, checkpointID, taskID string) (string, error)
	// CommitTask makes the part written in TaskDir durable, then records
	// the task's ack: an acked part is complete.
	CommitTask(ctx context.Context, jobID, checkpointID string, ack control.CheckpointTaskAck) error
	// TaskAck reads a task's ack; ok is false while there is none.
	TaskAck(ctx context.Context, jobID, checkpointID, taskID string) (ack control.CheckpointTaskAck, ok bool, err error)
	// FetchTask returns a local directory holding the task's part.
	FetchTask(ctx context.Context, jobID, checkpointID, taskID string) (string, error)
	// Complete writes the manifest, last: from then on the checkpoint
	// counts for recovery.
	Complete(ctx context.Context, m Manifest) error
	// Completed reports whether the job's checkpoint has its manifest.
	Completed(ctx context.Context, jobID, checkpointID string) (bool, error)
	// Latest is the completed checkpoint of the job with the highest Seq.
	Latest(ctx context.Context, jobID string) (m Manifest, ok bool, err error)
	// Prune deletes every checkpoint of the job (complete or not) older
	// than the keep newest complete ones.
	Prune(ctx context.Context, jobID string, keep int) error
}

// Open opens the store at location: a directory path
// (absolute, or file://path). Other schemes name shared stores, none of
// which is built in.
func Open(location string) (Store, error) {
	path, ok := strings.CutPrefix(location, "file://")
	if !ok && strings.Contains(location, "://") {
		return nil, fmt.Errorf("%s %q: unknown scheme (allowed: a directory path or file://path)", control.ParamCheckpointStore, location)
	}
	if path == "" {
		return nil, fmt.Errorf("%s is empty: name a directory every worker and the controller can reach", control.ParamCheckpointStore)
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s %q: must be an absolute path (workers resolve it in their own working directory)", control.ParamCheckpointStore, location)
	}
	return &LocalStore{root: filepath.Clean(path), location: location}, nil
}

// CheckpointID names checkpoint seq of a job; ids sort like their seq.
func ID(seq int) string { return fmt.Sprintf("cp-%06d", seq) }

// LocalStore keeps checkpoints in a directory of the local file
// system (shared by the workers of one machine, or mounted on all).
type LocalStore struct {
	root, location string
}

// Location implements Store.
func (s *LocalStore) Location() string { return s.location }

func (s *LocalStore) dir(jobID, checkpointID string, more ...string) (string, error) {
	for _, name := range append([]string{jobID, checkpointID}, more...) {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			return "", fmt.Errorf("checkpoint store: %q is not a valid job, checkpoint or task name", name)
		}
	}
	return filepath.Join(append([]string{s.root, jobID, checkpointID}, more...)...), nil
}

// TaskDir implements Store.
func (s *LocalStore) TaskDir(jobID, checkpointID, taskID string) (string, error) {
	dir, err := s.dir(jobID, checkpointID, taskID)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); err == nil {
		return "", fmt.Errorf("checkpoint %s of job %s: task %s's part already exists in %s", checkpointID, jobID, taskID, dir)
	}
	return dir, nil
}

// CommitTask implements Store: the part is already in place, so
// only the ack is written, atomically (rename).
func (s *LocalStore) CommitTask(_ context.Context, jobID, checkpointID string, ack control.CheckpointTaskAck) error {
	dir, err := s.dir(jobID, checkpointID, ack.TaskID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint store: %w", err)
	}
	return WriteJSONAtomic(filepath.Join(dir, AckFile), ack)
}

// TaskAck implements Store.
func (s *LocalStore) TaskAck(_ context.Context, jobID, checkpointID, taskID string) (control.CheckpointTaskAck, bool, error) {
	var ack control.CheckpointTaskAck
	dir, err := s.dir(jobID, checkpointID, taskID)
	if err != nil {
		return ack, false, err
	}
	ok, err := ReadJSON(filepath.Join(dir, AckFile), &ack)
	return ack, ok, err
}

// FetchTask implements Store.
func (s *LocalStore) FetchTask(_ context.Context, jobID, checkpointID, taskID string) (string, error) {
	dir, err := s.dir(jobID, checkpointID, taskID)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, AckFile)); err != nil {
		return "", fmt.Errorf("checkpoint %s of job %s has no complete part of task %s: %w", checkpointID, jobID, taskID, err)
	}
	return dir, nil
}

// Complete implements Store.
func (s *LocalStore) Complete(_ context.Context, m Manifest) error {
	dir, err := s.dir(m.JobID, m.CheckpointID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint store: %w", err)
	}
	return WriteJSONAtomic(filepath.Join(dir, ManifestFile), m)
}

// Completed implements Store.
func (s *LocalStore) Completed(_ context.Context, jobID, checkpointID string) (bool, error) {
	dir, err := s.dir(jobID, checkpointID)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(filepath.Join(dir, ManifestFile))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("checkpoint store: %w", err)
}

// list lists the ids of the job's checkpoints, oldest first, and
// which of them have a manifest.
func (s *LocalStore) list(jobID string) (ids []string, complete map[string]bool, err error) {
	jobDir, err := s.dir(jobID, "x")
	if err != nil {
		return nil, nil, err
	}
	jobDir = filepath.Dir(jobDir)
	entries, err := os.ReadDir(jobDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint store: %w", err)
	}
	complete = map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ids = append(ids, e.Name())
		if _, err := os.Stat(filepath.Join(jobDir, e.Name(), ManifestFile)); err == nil {
			complete[e.Name()] = true
		}
	}
	slices.Sort(ids)
	return ids, complete, nil
}

// Latest implements Store.
func (s *LocalStore) Latest(_ context.Context, jobID string) (Manifest, bool, error) {
	var m Manifest
	ids, complete, err := s.list(jobID)
	if err != nil {
		return m, false, err
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if !complete[ids[i]] {
			continue
		}
		dir, _ := s.dir(jobID, ids[i])
		ok, err := ReadJSON(filepath.Join(dir, ManifestFile), &m)
		return m, ok, err
	}
	return m, false, nil
}

// Prune implements Store.
func (s *LocalStore) Prune(_ context.Context, jobID string, keep int) error {
	ids, complete, err := s.list(jobID)
	if err != nil {
		return err
	}
	kept := 0
	oldestKept := len(ids)
	for i := len(ids) - 1; i >= 0 && kept < keep; i-- {
		if complete[ids[i]] {
			kept++
			oldestKept = i
		}
	}
	if kept < keep {
		return nil // fewer complete checkpoints than to keep: delete nothing
	}
	for _, id := range ids[:oldestKept] {
		dir, _ := s.dir(jobID, id)
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("checkpoint store: prune %s: %w", dir, err)
		}
	}
	return nil
}

func WriteJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadJSON decodes path into v; ok is false when the file does not exist.
func ReadJSON(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", path, err)
	}
	return true, nil
}

// Files inside a task's snapshot directory.
const (
	SnapshotStateDir = "pebble"    // the Pebble checkpoint
	SnapshotTaskFile = "task.json" // TaskSnapshot, with the KLT
)
