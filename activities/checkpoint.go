package activities

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// Steps of an aligned checkpoint (workflows/checkpoint_job.go) and of a
// recovery from one (workflows/recover_job.go). The data-plane side is in
// dataplane/checkpoint_barrier.go.

// ErrTypeCheckpointFailed marks a checkpoint that a task refused or that
// did not complete in time; retrying the same checkpoint cannot help.
const ErrTypeCheckpointFailed = "CheckpointFailed"

// CheckpointKeep is how many completed checkpoints of a job are kept.
const CheckpointKeep = 2

// DefaultCheckpointStore is the checkpoint store location used when the
// job names none: $KOALA_HOME/checkpoints ($KOALA_HOME defaults to ./.koala),
// absolute because the workers resolve it.
func DefaultCheckpointStore() (string, error) {
	abs, err := filepath.Abs(filepath.Join(control.Home(), "checkpoints"))
	if err != nil {
		return "", fmt.Errorf("checkpoint store: %w", err)
	}
	return abs, nil
}

// withCheckpointStore sets the job's ParamCheckpointStore to the default
// when it names none, and checks that the store opens.
func withCheckpointStore(job *control.JobSpec) error {
	if job.Params[control.ParamCheckpointStore] == "" {
		loc, err := DefaultCheckpointStore()
		if err != nil {
			return err
		}
		params := maps.Clone(job.Params)
		if params == nil {
			params = map[string]string{}
		}
		params[control.ParamCheckpointStore] = loc
		job.Params = params
	}
	_, err := checkpoint.Open(job.Params[control.ParamCheckpointStore])
	return err
}

// CheckpointInput names one checkpoint of a deployed job.
type CheckpointInput struct {
	Deployment   control.Deployment `json:"deployment"`
	CheckpointID string             `json:"checkpoint_id"`
	TimeoutSecs  float64            `json:"timeout_secs,omitempty"`
}

// InjectReply is what the sources recorded when they emitted the barrier.
type InjectReply struct {
	Offsets    map[int32]int64 `json:"offsets"`
	InjectedAt time.Time       `json:"injected_at"`
}

func (a *Activities) checkpointStore(dep control.Deployment) (checkpoint.Store, error) {
	st, err := checkpoint.Open(dep.Job.Params[control.ParamCheckpointStore])
	if err != nil {
		return nil, badConfig(err)
	}
	return st, nil
}

// InjectCheckpoint makes every source task emit the checkpoint barrier
// after the records it emitted so far. A retry re-asks every source; one
// that already injected answers with the offsets it recorded.
func (a *Activities) InjectCheckpoint(ctx context.Context, in CheckpointInput) (InjectReply, error) {
	rep := InjectReply{Offsets: map[int32]int64{}, InjectedAt: time.Now()}
	if _, err := a.checkpointStore(in.Deployment); err != nil {
		return rep, err
	}
	order, groups := tasksByWorker(in.Deployment, isSource(in.Deployment))
	for _, wid := range order {
		var r control.CheckpointInjectReply
		req := control.CheckpointRequest{CheckpointID: in.CheckpointID, TaskIDs: groups[wid]}
		if err := a.request(ctx, wid, control.VerbCheckpointInject, in.Deployment.Job.JobID, "", req, &r); err != nil {
			return rep, err
		}
		for p, o := range r.Offsets {
			rep.Offsets[p] = o
		}
	}
	return rep, nil
}

// AwaitReply is every task's ack of a checkpoint.
type AwaitReply struct {
	Acks []control.CheckpointTaskAck `json:"acks"`
	// DurationMillis runs from the injection to the last ack seen.
	DurationMillis float64 `json:"duration_millis"`
}

// AwaitCheckpointInput waits for the acks of a checkpoint injected at InjectedAt.
type AwaitCheckpointInput struct {
	CheckpointInput
	InjectedAt time.Time `json:"injected_at"`
}

// AwaitCheckpoint polls the store until every task of the deployment
// acked the checkpoint or TimeoutSecs passed. A refused part or the
// timeout fail it with ErrTypeCheckpointFailed, naming the tasks.
func (a *Activities) AwaitCheckpoint(ctx context.Context, in AwaitCheckpointInput) (AwaitReply, error) {
	var rep AwaitReply
	store, err := a.checkpointStore(in.Deployment)
	if err != nil {
		return rep, err
	}
	timeout := time.Duration(in.TimeoutSecs * float64(time.Second))
	if timeout <= 0 {
		timeout = time.Minute
	}
	deadline := time.Now().Add(timeout)
	acks := map[string]control.CheckpointTaskAck{}
	jobID := in.Deployment.Job.JobID
	for {
		var missing []string
		for _, t := range in.Deployment.Tasks {
			if _, ok := acks[t.ID]; ok {
				continue
			}
			ack, ok, err := store.TaskAck(ctx, jobID, in.CheckpointID, t.ID)
			if err != nil {
				return rep, err
			}
			if !ok {
				missing = append(missing, t.ID)
				continue
			}
			acks[t.ID] = ack
		}
		if len(missing) == 0 {
			if !in.InjectedAt.IsZero() {
				rep.DurationMillis = float64(time.Since(in.InjectedAt).Microseconds()) / 1e3
			}
			break
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("checkpoint %s of job %s: no ack from %d task(s) (%s) within %s", in.CheckpointID, jobID, len(missing), strings.Join(missing, ", "), timeout)
			return rep, temporal.NewNonRetryableApplicationError(msg, ErrTypeCheckpointFailed, nil)
		}
		heartbeat(ctx, len(acks))
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	var refused []string
	for _, t := range in.Deployment.Tasks {
		ack := acks[t.ID]
		rep.Acks = append(rep.Acks, ack)
		if ack.Error != "" {
			refused = append(refused, fmt.Sprintf("%s: %s", t.ID, ack.Error))
		}
	}
	if len(refused) > 0 {
		msg := fmt.Sprintf("checkpoint %s of job %s refused by %s", in.CheckpointID, jobID, strings.Join(refused, "; "))
		return rep, temporal.NewNonRetryableApplicationError(msg, ErrTypeCheckpointFailed, nil)
	}
	return rep, nil
}

// CompleteCheckpointInput is everything the manifest of a checkpoint holds.
type CompleteCheckpointInput struct {
	Deployment     control.Deployment          `json:"deployment"`
	CheckpointID   string                      `json:"checkpoint_id"`
	Seq            int                         `json:"seq"`
	Offsets        map[int32]int64             `json:"offsets"`
	Acks           []control.CheckpointTaskAck `json:"acks"`
	StartedAt      time.Time                   `json:"started_at"`
	DurationMillis float64                     `json:"duration_millis"`
}

// CompleteCheckpoint writes the manifest, which makes the checkpoint count
// for recovery, records its metrics, and prunes checkpoints older than
// the CheckpointKeep newest.
func (a *Activities) CompleteCheckpoint(ctx context.Context, in CompleteCheckpointInput) (checkpoint.Manifest, error) {
	m := checkpoint.Manifest{
		JobID: in.Deployment.Job.JobID, CheckpointID: in.CheckpointID, Seq: in.Seq, Deployment: in.Deployment,
		Offsets: in.Offsets, Tasks: in.Acks, StartedAt: in.StartedAt, CompletedAt: time.Now().UTC(), DurationMillis: in.DurationMillis,
	}
	for _, ack := range in.Acks {
		m.Bytes += ack.Bytes
		m.MaxAlignMillis = max(m.MaxAlignMillis, ack.AlignMillis)
	}
	if err := checkOffsets(in.Deployment, in.Offsets); err != nil {
		return m, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeCheckpointFailed, err)
	}
	store, err := a.checkpointStore(in.Deployment)
	if err != nil {
		return m, err
	}
	if err := store.Complete(ctx, m); err != nil {
		return m, err
	}
	a.recordCheckpoint(metrics.CheckpointRow{
		Time: m.CompletedAt, Experiment: in.Deployment.Job.Experiment, Job: m.JobID, CheckpointID: m.CheckpointID, Kind: metrics.CheckpointKindCheckpoint,
		Millis: m.DurationMillis, Bytes: m.Bytes, AlignMillis: m.MaxAlignMillis, Tasks: uint32(len(m.Tasks)),
	})
	if err := store.Prune(ctx, m.JobID, CheckpointKeep); err != nil {
		a.logger().Warn("prune checkpoints", "job", m.JobID, "err", err)
	}
	return m, nil
}

// checkOffsets requires an offset for every partition of the job's topic.
func checkOffsets(dep control.Deployment, offsets map[int32]int64) error {
	var missing []int32
	for p := range int32(dep.Job.Partitions) {
		if _, ok := offsets[p]; !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("checkpoint has no source offset for partition(s) %v of %d", missing, dep.Job.Partitions)
	}
	return nil
}

// CommitCheckpoint reports a completed checkpoint to the workers of the
// deployment's sink tasks, whose two-phase sinks then commit the output
// the checkpoint covers (dataplane/checkpoint_commit.go). It fails when a
// worker does not answer or a sink could not commit.
func (a *Activities) CommitCheckpoint(ctx context.Context, in CheckpointInput) error {
	sinks := map[string]bool{}
	for _, op := range in.Deployment.Job.Operators {
		if len(in.Deployment.Job.Downstreams(op.Name)) == 0 {
			sinks[op.Name] = true
		}
	}
	order, groups := tasksByWorker(in.Deployment, func(t control.TaskRef) bool { return sinks[t.Operator] })
	var errs []string
	for _, wid := range order {
		req := control.CheckpointRequest{CheckpointID: in.CheckpointID, TaskIDs: groups[wid]}
		if err := a.request(ctx, wid, control.VerbCheckpointCommit, in.Deployment.Job.JobID, "", req, nil); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("commit checkpoint %s: %s", in.CheckpointID, strings.Join(errs, "; "))
	}
	return nil
}

// AbortCheckpoint makes every task stop aligning on a failed checkpoint
// (releasing what it holds) and drop its late barriers. Workers that do
// not answer are skipped: a lost worker is recovery's business.
func (a *Activities) AbortCheckpoint(ctx context.Context, in CheckpointInput) error {
	order, groups := tasksByWorker(in.Deployment, nil)
	var errs []string
	for _, wid := range order {
		req := control.CheckpointRequest{CheckpointID: in.CheckpointID, TaskIDs: groups[wid]}
		if err := a.request(ctx, wid, control.VerbCheckpointAbort, in.Deployment.Job.JobID, "", req, nil); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		a.logger().Warn("abort checkpoint", "checkpoint", in.CheckpointID, "errors", strings.Join(errs, "; "))
	}
	return nil
}

// LatestCheckpointInput names a job and its checkpoint store.
type LatestCheckpointInput struct {
	JobID string `json:"job_id"`
	Store string `json:"store"`
}

// LatestCheckpoint returns the newest completed checkpoint of the job; ok
// is false when there is none.
type LatestCheckpointReply struct {
	OK       bool                `json:"ok"`
	Manifest checkpoint.Manifest `json:"manifest"`
}

// LatestCheckpoint reads the newest completed checkpoint's manifest.
func (a *Activities) LatestCheckpoint(ctx context.Context, in LatestCheckpointInput) (LatestCheckpointReply, error) {
	var rep LatestCheckpointReply
	store, err := checkpoint.Open(in.Store)
	if err != nil {
		return rep, badConfig(err)
	}
	m, ok, err := store.Latest(ctx, in.JobID)
	rep.OK, rep.Manifest = ok, m
	return rep, err
}

// RestoreInput loads checkpoint CheckpointID into the deployed, not yet
// started tasks of Deployment; From maps a task to the part it loads
// (default: its own id).
type RestoreInput struct {
	Deployment   control.Deployment `json:"deployment"`
	CheckpointID string             `json:"checkpoint_id"`
	From         map[string]string  `json:"from,omitempty"`
}

// RestoreCheckpoint loads each stateful task's part (keyed state, sink
// ledger) on its worker.
func (a *Activities) RestoreCheckpoint(ctx context.Context, in RestoreInput) ([]control.CheckpointTaskAck, error) {
	order, groups := tasksByWorker(in.Deployment, func(t control.TaskRef) bool { return !isSource(in.Deployment)(t) })
	var out []control.CheckpointTaskAck
	for _, wid := range order {
		var r control.CheckpointRestoreReply
		req := control.CheckpointRequest{CheckpointID: in.CheckpointID, TaskIDs: groups[wid], From: in.From}
		if err := a.request(ctx, wid, control.VerbCheckpointRestore, in.Deployment.Job.JobID, "", req, &r); err != nil {
			return out, err
		}
		out = append(out, r.Tasks...)
		heartbeat(ctx, wid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TaskID < out[j].TaskID })
	return out, nil
}

// RecoveryRecordInput is one recovery's metrics row.
type RecoveryRecordInput struct {
	Experiment   string   `json:"experiment"`
	JobID        string   `json:"job_id"`
	CheckpointID string   `json:"checkpoint_id"`
	Lost         []string `json:"lost"`
	Millis       float64  `json:"millis"`
	Tasks        int      `json:"tasks"`
}

// RecordRecovery records how long a recovery took, from the loss being
// known to the restored tasks running.
func (a *Activities) RecordRecovery(_ context.Context, in RecoveryRecordInput) error {
	lost := slices.Clone(in.Lost)
	slices.Sort(lost)
	a.recordCheckpoint(metrics.CheckpointRow{
		Time: time.Now().UTC(), Experiment: in.Experiment, Job: in.JobID, CheckpointID: in.CheckpointID, Kind: metrics.CheckpointKindRecovery,
		Millis: in.Millis, Tasks: uint32(in.Tasks), Detail: "lost " + strings.Join(lost, ","),
	})
	return nil
}

// recordCheckpoint hands row to the events recorder when it keeps checkpoint rows.
func (a *Activities) recordCheckpoint(row metrics.CheckpointRow) {
	if r, ok := a.events().(metrics.CheckpointRecorder); ok {
		r.RecordCheckpoint(row)
	}
}
