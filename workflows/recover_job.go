package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows/plan"
)

// ErrTypeNoCheckpoint: a job lost a worker but has no completed checkpoint
// to recover from.
const ErrTypeNoCheckpoint = "NoCheckpoint"

// RecoverJobInput recovers job JobID after the loss of the Lost workers.
type RecoverJobInput struct {
	JobID string `json:"job_id"`
	// Store is the job's checkpoint store location (ParamCheckpointStore).
	Store string `json:"store"`
	// Workers are the job's workers; the Lost ones are not used or asked.
	Workers []control.WorkerInfo `json:"workers"`
	Lost    []string             `json:"lost"`
}

// RecoverJobResult is the running, recovered deployment.
type RecoverJobResult struct {
	Deployment   control.Deployment `json:"deployment"`
	CheckpointID string             `json:"checkpoint_id"`
	Offsets      map[int32]int64    `json:"offsets"`
	// Moved lists the tasks that ran on a lost worker and now run elsewhere.
	Moved  []string `json:"moved"`
	Millis float64  `json:"millis"`
}

// RecoverJob restarts a job from its latest completed checkpoint after a
// worker loss:
//
//  1. stop: every task of the job on every surviving worker stops (they
//     hold state and input past the checkpoint, which is thrown away);
//  2. latest: the newest checkpoint with a manifest is read — none fails
//     the recovery with ErrTypeNoCheckpoint;
//  3. place: the checkpoint's deployment, with the tasks of the lost
//     workers moved to survivors (plan.Replace);
//  4. deploy: every task is created again, sources positioned at the
//     checkpoint's offsets;
//  5. restore: each stateful task loads its part (keyed state — keys its
//     part's lookup table still names on an old owner are copied from
//     that owner's part, so no restored task fetches; the sink's ledger
//     and values, so output is exactly once — see
//     dataplane/checkpoint_restore.go and checkpoint_klt.go; a
//     transactional Kafka sink commits the checkpoint's transaction and
//     fences the lost incarnation's, see dataplane/kafkaio/txn.go);
//  6. start: the tasks run and replay the input after the cut.
//
// Input still in flight to the stopped tasks is dropped by the workers
// that receive it (dataplane's dropStale) instead of resetting their
// streams; it is replayed from Kafka anyway. Frames carry no incarnation,
// so the fence is time: StopJob returns only after a confirmation round
// over every surviving worker, by when those frames have long arrived.
//
// The deployment after recovery is the checkpoint's: a reconfiguration
// that ran after the checkpoint is undone (its effect on placement, not
// on results); one that was running is cancelled by the caller and, since
// "reconfigs-after-recovery", re-planned from this deployment
// (run_recovery_reconfigs.go).
func RecoverJob(ctx workflow.Context, in RecoverJobInput) (RecoverJobResult, error) {
	var res RecoverJobResult
	began := workflow.Now(ctx)
	actx := workflow.WithActivityOptions(ctx, stepOptions())
	step := func(name string) workflow.Context { return workflow.WithActivityOptions(actx, withSummary(actx, name)) }
	var survivors []string
	for _, w := range in.Workers {
		if !slices.Contains(in.Lost, w.ID) {
			survivors = append(survivors, w.ID)
		}
	}
	if err := workflow.ExecuteActivity(step("recover-stop"), a.StopJob, activities.StopJobInput{
		JobID: in.JobID, Workers: survivors, Lost: in.Lost,
	}).Get(ctx, nil); err != nil {
		return res, fmt.Errorf("recover job %s: stop: %w", in.JobID, err)
	}
	var latest activities.LatestCheckpointReply
	if err := workflow.ExecuteActivity(step("recover-latest"), a.LatestCheckpoint, activities.LatestCheckpointInput{
		JobID: in.JobID, Store: in.Store,
	}).Get(ctx, &latest); err != nil {
		return res, fmt.Errorf("recover job %s: %w", in.JobID, err)
	}
	if !latest.OK {
		err := fmt.Errorf("job %s has no completed checkpoint in %s to recover from", in.JobID, in.Store)
		return res, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeNoCheckpoint, err)
	}
	m := latest.Manifest
	res.CheckpointID, res.Offsets = m.CheckpointID, m.Offsets
	dep, err := plan.Replace(m.Deployment, in.Lost, in.Workers)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidDeployment", err)
	}
	for i, t := range dep.Tasks {
		if m.Deployment.Tasks[i].WorkerID != t.WorkerID {
			res.Moved = append(res.Moved, t.ID)
		}
	}
	res.Deployment = dep
	if err := workflow.ExecuteActivity(step("recover-deploy"), a.DeployTasks, activities.TasksInput{
		Deployment: dep, StartOffsets: m.Offsets,
	}).Get(ctx, nil); err != nil {
		return res, cleanup(ctx, dep, fmt.Errorf("recover job %s: deploy: %w", in.JobID, err))
	}
	if err := workflow.ExecuteActivity(step("recover-restore"), a.RestoreCheckpoint, activities.RestoreInput{
		Deployment: dep, CheckpointID: m.CheckpointID,
	}).Get(ctx, nil); err != nil {
		return res, cleanup(ctx, dep, fmt.Errorf("recover job %s: restore %s: %w", in.JobID, m.CheckpointID, err))
	}
	if err := workflow.ExecuteActivity(step("recover-start"), a.StartTasks, activities.TasksInput{Deployment: dep}).Get(ctx, nil); err != nil {
		return res, cleanup(ctx, dep, fmt.Errorf("recover job %s: start: %w", in.JobID, err))
	}
	res.Millis = float64(workflow.Now(ctx).Sub(began)) / float64(time.Millisecond)
	_ = workflow.ExecuteActivity(step("recover-record"), a.RecordRecovery, activities.RecoveryRecordInput{
		Experiment: dep.Job.Experiment, JobID: in.JobID, CheckpointID: m.CheckpointID, Lost: in.Lost, Millis: res.Millis, Tasks: len(dep.Tasks),
	}).Get(ctx, nil) // metrics are best effort
	return res, nil
}
