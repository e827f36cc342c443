package workflows

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"koala/activities"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
)

// checkpointMocks answers the checkpoint and recovery activities: every
// checkpoint completes, with offsets equal to 100 × its sequence number,
// and the latest completed one is what recovery reads.
type checkpointMocks struct {
	mu        sync.Mutex
	completed []activities.CompleteCheckpointInput
	refuse    bool // AwaitCheckpoint fails every checkpoint
	noCommit  bool // CommitCheckpoint fails (the sinks cannot be told)
	// restoreTakes is how long RestoreCheckpoint takes (a recovery's
	// duration in workflow time).
	restoreTakes time.Duration
}

func (m *checkpointMocks) register(env *testsuite.TestWorkflowEnvironment, calls *activityLog) {
	env.RegisterWorkflow(CheckpointJob)
	env.RegisterWorkflow(RecoverJob)
	env.OnActivity(a.InjectCheckpoint, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CheckpointInput) (activities.InjectReply, error) {
			calls.add("InjectCheckpoint", in, env.Now())
			var seq int
			for i := 1; i < 1000 && checkpoint.ID(i) != in.CheckpointID; i++ {
				seq = i + 1
			}
			off := map[int32]int64{}
			for p := range int32(in.Deployment.Job.Partitions) {
				off[p] = int64(100 * seq)
			}
			return activities.InjectReply{Offsets: off}, nil
		})
	env.OnActivity(a.AwaitCheckpoint, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.AwaitCheckpointInput) (activities.AwaitReply, error) {
			calls.add("AwaitCheckpoint", in, env.Now())
			if m.refuse {
				return activities.AwaitReply{}, assert.AnError
			}
			return activities.AwaitReply{DurationMillis: 5}, nil
		})
	env.OnActivity(a.CompleteCheckpoint, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CompleteCheckpointInput) (checkpoint.Manifest, error) {
			calls.add("CompleteCheckpoint", in, env.Now())
			m.mu.Lock()
			m.completed = append(m.completed, in)
			m.mu.Unlock()
			return checkpoint.Manifest{CheckpointID: in.CheckpointID, Offsets: in.Offsets, DurationMillis: 5, Bytes: 1000}, nil
		})
	env.OnActivity(a.CommitCheckpoint, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CheckpointInput) error {
			calls.add("CommitCheckpoint", in, env.Now())
			if m.noCommit {
				return assert.AnError
			}
			return nil
		})
	env.OnActivity(a.AbortCheckpoint, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CheckpointInput) error {
			calls.add("AbortCheckpoint", in, env.Now())
			return nil
		})
	env.OnActivity(a.LatestCheckpoint, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.LatestCheckpointInput) (activities.LatestCheckpointReply, error) {
			calls.add("LatestCheckpoint", in, env.Now())
			m.mu.Lock()
			defer m.mu.Unlock()
			if len(m.completed) == 0 {
				return activities.LatestCheckpointReply{}, nil
			}
			last := m.completed[len(m.completed)-1]
			return activities.LatestCheckpointReply{OK: true, Manifest: checkpoint.Manifest{
				JobID: in.JobID, CheckpointID: last.CheckpointID, Seq: last.Seq, Deployment: last.Deployment, Offsets: last.Offsets,
			}}, nil
		})
	env.OnActivity(a.RestoreCheckpoint, mock.Anything, mock.Anything).After(m.restoreTakes).Return(
		func(_ context.Context, in activities.RestoreInput) ([]control.CheckpointTaskAck, error) {
			calls.add("RestoreCheckpoint", in, env.Now())
			return nil, nil
		})
	env.OnActivity(a.RecordRecovery, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecoveryRecordInput) error {
			calls.add("RecordRecovery", in, env.Now())
			return nil
		})
}

// completedSnapshot returns the checkpoints completed so far.
func (m *checkpointMocks) completedSnapshot() []activities.CompleteCheckpointInput {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]activities.CompleteCheckpointInput(nil), m.completed...)
}

func checkpointExperiment() ExperimentInput {
	in := helloExperiment()
	in.Reconfigurations = nil
	in.ReconfigProtocol = ProtocolLazy
	in.TotalRuntimeSeconds = 60
	in.CheckpointIntervalSeconds = 10
	return in
}

// TestRunExperimentRecoversFromCheckpoint: checkpoints every 10 s; w2 is
// lost at 35 s, after three completed. The run recovers from the third
// (its offsets, its deployment with w2's tasks on the survivors), goes on
// taking checkpoints of the recovered deployment and completes; the end
// of the input and the sink counts use the recovered deployment.
func TestRunExperimentRecoversFromCheckpoint(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockExperimentActivities(env, calls, experimentMocks{
		ackedPerProducer: 100, endOffsets: map[int32]int64{0: 100}, sink: activities.SinkCounts{Received: 100, Distinct: 100, Tasks: 1},
		watchAfter: 35 * time.Second, watchErr: workerLostErr("w2", 10*time.Second),
	})
	ckpts := &checkpointMocks{}
	ckpts.register(env, calls)
	env.ExecuteWorkflow(RunExperiment, checkpointExperiment())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.NotNil(t, res.Checkpoints)
	require.Len(t, res.Checkpoints.Recoveries, 1)
	rec := res.Checkpoints.Recoveries[0]
	assert.Equal(t, "w2", rec.Lost)
	assert.Equal(t, checkpoint.ID(3), rec.CheckpointID, "recovery uses the latest completed checkpoint")
	assert.NotEmpty(t, rec.Moved)
	assert.GreaterOrEqual(t, res.Checkpoints.Completed, 4, "checkpoints go on after the recovery")
	assertCommitsFollowCompletions(t, calls)

	stops := calls.of("StopJob")
	require.NotEmpty(t, stops)
	stop := stops[0].Input.(activities.StopJobInput)
	assert.Equal(t, []string{"w2"}, stop.Lost)
	assert.NotContains(t, stop.Workers, "w2")

	deploys := calls.of("DeployTasks")
	require.Len(t, deploys, 2, "initial deployment and the recovery's")
	redeploy := tasksOf(t, deploys[1])
	assert.Equal(t, map[int32]int64{0: 300, 1: 300, 2: 300, 3: 300}, redeploy.StartOffsets, "sources rewind to the checkpoint's offsets")
	for _, task := range redeploy.Deployment.Tasks {
		assert.NotEqual(t, "w2", task.WorkerID, "task %s placed on the lost worker", task.ID)
	}
	restore := calls.of("RestoreCheckpoint")
	require.Len(t, restore, 1)
	assert.Equal(t, checkpoint.ID(3), restore[0].Input.(activities.RestoreInput).CheckpointID)

	// After the recovery, checkpoints and the end of the run use the
	// recovered deployment.
	injects := calls.of("InjectCheckpoint")
	lastInject := injects[len(injects)-1].Input.(activities.CheckpointInput)
	assert.Equal(t, redeploy.Deployment, lastInject.Deployment)
	drains := calls.of("FinishAndDrain")
	require.Len(t, drains, 1)
	assert.Equal(t, redeploy.Deployment, drains[0].Input.(activities.DrainInput).Deployment)
	assert.Equal(t, redeploy.Deployment, res.Final)
	assert.Equal(t, int64(0), res.Lost)
}

// TestRunExperimentLossBeforeAnyCheckpointFails: with no completed
// checkpoint a lost worker fails the run as without checkpoints.
func TestRunExperimentLossBeforeAnyCheckpointFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lostAt time.Duration
		refuse bool
	}{
		{"before the first checkpoint", 5 * time.Second, false},
		{"every checkpoint failed", 35 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			calls := &activityLog{}
			mockExperimentActivities(env, calls, experimentMocks{
				ackedPerProducer: 100, endOffsets: map[int32]int64{0: 100},
				watchAfter: tc.lostAt, watchErr: workerLostErr("w2", 10*time.Second),
			})
			ckpts := &checkpointMocks{refuse: tc.refuse}
			ckpts.register(env, calls)
			env.ExecuteWorkflow(RunExperiment, checkpointExperiment())
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.Error(t, err)
			assert.Equal(t, activities.ErrTypeWorkerLost, lostWorker(err).Type())
			assert.Empty(t, calls.of("RestoreCheckpoint"))
			if tc.refuse {
				assert.NotEmpty(t, calls.of("AbortCheckpoint"), "a failed checkpoint is aborted on the tasks")
			}
			assert.Empty(t, calls.of("CommitCheckpoint"), "no checkpoint completed, so none is committed")
		})
	}
}

// TestCheckpointsSkipWhileReconfiguring: no checkpoint starts while a
// reconfiguration child runs (30 s to 90 s here); the ticks meanwhile are
// skipped, and checkpoints resume after it.
func TestCheckpointsSkipWhileReconfiguring(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockExperimentActivities(env, calls, experimentMocks{job: twoKeyedJob, ackedPerProducer: 10, sink: activities.SinkCounts{Received: 10, Distinct: 10, Tasks: 1}})
	ckpts := &checkpointMocks{}
	ckpts.register(env, calls)
	children := &mockedChildren{}
	children.register(env, ReconfigureLazy)
	in := twoKeyedExperiment(ProtocolLazy, scaleSpec(30, "first", 3))
	in.TotalRuntimeSeconds = 120
	in.CheckpointIntervalSeconds = 10
	env.ExecuteWorkflow(RunExperiment, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))
	runs := children.byOperator("first")
	require.Len(t, runs, 1)
	for _, c := range calls.of("InjectCheckpoint") {
		inReconfig := !c.At.Before(runs[0].start) && c.At.Before(runs[0].end)
		assert.False(t, inReconfig, "checkpoint injected at %s while the reconfiguration ran (%s–%s)", c.At, runs[0].start, runs[0].end)
	}
	require.NotNil(t, res.Checkpoints)
	assert.GreaterOrEqual(t, res.Checkpoints.Skipped, 5)
	assert.GreaterOrEqual(t, res.Checkpoints.Completed, 4)
	// The checkpoints after it are of the new deployment.
	injects := calls.of("InjectCheckpoint")
	last := injects[len(injects)-1].Input.(activities.CheckpointInput)
	assert.Len(t, last.Deployment.TasksOf("first"), 3)
}

// assertCommitsFollowCompletions: every completed checkpoint is reported
// to the sinks (CommitCheckpoint) right after its manifest, and only those.
func assertCommitsFollowCompletions(t *testing.T, calls *activityLog) {
	t.Helper()
	calls.mu.Lock()
	defer calls.mu.Unlock()
	var seq []string
	for _, c := range calls.calls {
		switch c.Activity {
		case "CompleteCheckpoint":
			seq = append(seq, "complete "+c.Input.(activities.CompleteCheckpointInput).CheckpointID)
		case "CommitCheckpoint":
			seq = append(seq, "commit "+c.Input.(activities.CheckpointInput).CheckpointID)
		}
	}
	require.NotEmpty(t, seq)
	require.Zero(t, len(seq)%2, "calls %v", seq)
	for i := 0; i < len(seq); i += 2 {
		id := strings.TrimPrefix(seq[i], "complete ")
		assert.Equal(t, []string{"complete " + id, "commit " + id}, seq[i:i+2])
	}
}

// TestCheckpointCompleteDespiteFailedCommit: a checkpoint whose report to
// the sinks fails still counts as completed (its manifest is written; the
// sinks settle it from the store) and recovery can use it.
func TestCheckpointCompleteDespiteFailedCommit(t *testing.T) {
	env := newTestEnv(t)
	calls := &activityLog{}
	mockExperimentActivities(env, calls, experimentMocks{
		ackedPerProducer: 100, endOffsets: map[int32]int64{0: 100}, sink: activities.SinkCounts{Received: 100, Distinct: 100, Tasks: 1},
		watchAfter: 35 * time.Second, watchErr: workerLostErr("w2", 10*time.Second),
	})
	ckpts := &checkpointMocks{noCommit: true}
	ckpts.register(env, calls)
	env.ExecuteWorkflow(RunExperiment, checkpointExperiment())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.NotNil(t, res.Checkpoints)
	assert.Zero(t, res.Checkpoints.Failed)
	assert.GreaterOrEqual(t, res.Checkpoints.Completed, 4)
	require.Len(t, res.Checkpoints.Recoveries, 1)
	assert.Equal(t, checkpoint.ID(3), res.Checkpoints.Recoveries[0].CheckpointID)
	assert.Empty(t, calls.of("AbortCheckpoint"), "a completed checkpoint is not aborted")
}
