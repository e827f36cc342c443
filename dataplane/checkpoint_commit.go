package dataplane

import (
	"context"
	"fmt"
	"koala/dataplane/control"
	"strings"
)

// Completion of a checkpoint, as seen by sinks that write outside the job.
//
// A sink whose output is visible outside the job (the transactional Kafka
// sink, kafkaio/txn.go) takes part in checkpoints in two phases: it
// pre-commits at the barrier (its part of the checkpoint names what to
// commit) and commits when the controller reports the checkpoint complete
// with VerbCheckpointCommit, after the manifest is written. A failed
// checkpoint is reported with VerbCheckpointAbort. A lost report only
// delays the output: the sink settles a pre-commit from the store when
// the next barrier arrives. A restored sink commits its part's pre-commit
// itself before it starts, since the report may have been lost with the
// worker.

// twoPhaseSink is implemented by sinks that commit their output with
// checkpoints. Every method runs on the task goroutine.
type twoPhaseSink interface {
	// transactional is false when the sink does not take part (the job
	// takes no checkpoints); the other methods are then no-ops.
	transactional() bool
	// preCommit ends the output of checkpoint id and writes what is
	// needed to commit it into the task's part directory dir.
	preCommit(ctx context.Context, id, dir string) (uint64, error)
	// commitCheckpoint: checkpoint id completed.
	commitCheckpoint(ctx context.Context, id string) error
	// abortCheckpoint: checkpoint id failed.
	abortCheckpoint(ctx context.Context, id string) error
	// finishInput: the input ended (EOS barrier); everything is final.
	finishInput(ctx context.Context) error
	// restoreCheckpoint loads the part in dir before the task starts.
	restoreCheckpoint(ctx context.Context, dir string) error
}

// twoPhase returns the task's operator as a participating twoPhaseSink.
func (t *task) twoPhase() (twoPhaseSink, bool) {
	tp, ok := t.op.(twoPhaseSink)
	if !ok || !tp.transactional() {
		return nil, false
	}
	return tp, true
}

// commitCheckpoint serves VerbCheckpointCommit: every running task of the
// job here with a two-phase sink commits. Failing to commit fails the
// task as well, since its output can no longer be exact.
func (w *Worker) commitCheckpoint(ctx context.Context, jobID string, req control.CheckpointRequest) error {
	var ids []string
	for _, t := range w.jobTasks(jobID, req.TaskIDs) {
		if _, ok := t.twoPhase(); ok && t.started.Load() {
			ids = append(ids, t.id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var failed []string
	err := w.onTaskGoroutines(ctx, jobID, ids, func(ctx context.Context, t *task) error {
		tp, _ := t.twoPhase()
		if err := tp.commitCheckpoint(ctx, req.CheckpointID); err != nil {
			t.fail(err)
			failed = append(failed, fmt.Sprintf("%s: %v", t.id, err))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", control.VerbCheckpointCommit, req.CheckpointID, err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s %s: %s", control.VerbCheckpointCommit, req.CheckpointID, strings.Join(failed, "; "))
	}
	return nil
}
