package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
)

// versionCheckpointCommit marks CheckpointJob runs that report the
// completed checkpoint to the sinks (step 4).
const versionCheckpointCommit = "checkpoint-commit"

// CheckpointJobInput starts checkpoint Seq of a running job.
type CheckpointJobInput struct {
	Deployment control.Deployment `json:"deployment"`
	Seq        int                `json:"seq"`
	// TimeoutSecs bounds the wait for every task's ack (default 60).
	TimeoutSecs float64 `json:"timeout_secs,omitempty"`
}

// CheckpointJobResult describes a completed checkpoint.
type CheckpointJobResult struct {
	CheckpointID   string          `json:"checkpoint_id"`
	Offsets        map[int32]int64 `json:"offsets"`
	Bytes          uint64          `json:"bytes"`
	DurationMillis float64         `json:"duration_millis"`
	MaxAlignMillis float64         `json:"max_align_millis"`
}

// CheckpointJob takes one aligned checkpoint of a running job
// (dataplane/checkpoint_barrier.go):
//
//  1. inject: every source records its partitions' next offsets and emits
//     the barrier after the records it emitted so far;
//  2. await: every task aligns the barrier over its inputs, writes its part
//     to the store and acks it there; the wait is bounded by TimeoutSecs;
//  3. complete: the manifest (deployment, offsets, per-task acks) is
//     written last, which makes the checkpoint count for recovery;
//  4. commit: the sinks are told the checkpoint completed, and two-phase
//     sinks (the transactional Kafka sink) commit the output it covers
//     (dataplane/checkpoint_commit.go). A failure here is logged only.
//
// When a step fails the checkpoint is aborted on every task (any held
// input is released, late barriers dropped) and the workflow fails; it
// has no manifest and recovery never uses it. The job keeps running.
//
// The caller must not run it while a reconfiguration is before its routing
// swap, and passes the deployment the swap installed; tasks refuse their
// part during the short steps of a migration anyway (see the rule in
// dataplane/checkpoint_barrier.go).
func CheckpointJob(ctx workflow.Context, in CheckpointJobInput) (CheckpointJobResult, error) {
	id := checkpoint.ID(in.Seq)
	res := CheckpointJobResult{CheckpointID: id}
	if in.Seq <= 0 {
		err := fmt.Errorf("checkpoint Seq %d must be ≥ 1", in.Seq)
		return res, temporal.NewNonRetryableApplicationError(err.Error(), "BadConfig", err)
	}
	timeout := in.TimeoutSecs
	if timeout <= 0 {
		timeout = 60
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Duration(timeout)*time.Second + time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrTypeCheckpointFailed, "BadConfig"},
		},
	})
	step := func(name string) workflow.Context { return workflow.WithActivityOptions(actx, withSummary(actx, name)) }
	started := workflow.Now(ctx)
	cp := activities.CheckpointInput{Deployment: in.Deployment, CheckpointID: id, TimeoutSecs: timeout}
	abort := func(cause error) (CheckpointJobResult, error) {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		dctx = workflow.WithActivityOptions(dctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})
		_ = workflow.ExecuteActivity(dctx, a.AbortCheckpoint, cp).Get(dctx, nil)
		return res, fmt.Errorf("checkpoint %s of job %s: %w", id, in.Deployment.Job.JobID, cause)
	}
	var inj activities.InjectReply
	if err := workflow.ExecuteActivity(step("checkpoint-inject"), a.InjectCheckpoint, cp).Get(ctx, &inj); err != nil {
		return abort(err)
	}
	var acks activities.AwaitReply
	if err := workflow.ExecuteActivity(step("checkpoint-await"), a.AwaitCheckpoint,
		activities.AwaitCheckpointInput{CheckpointInput: cp, InjectedAt: inj.InjectedAt}).Get(ctx, &acks); err != nil {
		return abort(err)
	}
	var m checkpoint.Manifest
	if err := workflow.ExecuteActivity(step("checkpoint-complete"), a.CompleteCheckpoint, activities.CompleteCheckpointInput{
		Deployment: in.Deployment, CheckpointID: id, Seq: in.Seq, Offsets: inj.Offsets, Acks: acks.Acks,
		StartedAt: started, DurationMillis: acks.DurationMillis,
	}).Get(ctx, &m); err != nil {
		return abort(err)
	}
	res.Offsets, res.Bytes, res.DurationMillis, res.MaxAlignMillis = m.Offsets, m.Bytes, m.DurationMillis, m.MaxAlignMillis
	if workflow.GetVersion(ctx, versionCheckpointCommit, workflow.DefaultVersion, 1) == 1 {
		// The checkpoint is complete whatever happens here: a sink that
		// missed the report settles it from the store at its next barrier.
		if err := workflow.ExecuteActivity(step("checkpoint-commit"), a.CommitCheckpoint, cp).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("checkpoint complete, but reporting it to the sinks failed", "checkpoint", id, "error", err)
		}
	}
	return res, nil
}
