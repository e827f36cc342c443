package workflows_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/statesvc"
	"koala/workflows"
)

// checkpointMidMigration takes a checkpoint of dep while a lazy migration
// still has keys to fetch, from seq on. Parts are refused only during the
// short steps (route gates or drains open, a handoff being sent; see
// dataplane/checkpoint_barrier.go), so a refusal naming one of those is
// retried with the next seq for up to a minute; any other failure fails
// the test.
func (j *checkpointedJob) checkpointMidMigration(t *testing.T, dep control.Deployment, seq int) workflows.CheckpointJobResult {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for ; ; seq++ {
		var res workflows.CheckpointJobResult
		err := runWorkflow(t, j.acts, workflows.CheckpointJob, workflows.CheckpointJobInput{Deployment: dep, Seq: seq, TimeoutSecs: 30}, &res)
		if err == nil {
			t.Logf("checkpoint %s during the migration: %.1f ms, %d bytes, max alignment %.1f ms", res.CheckpointID, res.DurationMillis, res.Bytes, res.MaxAlignMillis)
			return res
		}
		if strings.Contains(err.Error(), "keys still to fetch") || !strings.Contains(err.Error(), "migration is in progress") {
			t.Fatalf("checkpoint %d during the migration: %v", seq, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint completed within a minute of the reconfiguration; last: %v", err)
		}
		t.Logf("checkpoint %d refused during a short migration step, retrying: %v", seq, err)
	}
}

// scaledMidMigration starts a fetch-on-demand counter job over many keys,
// rescales it lazily 2→4 and returns the new deployment once records flow
// through it, with keys still to fetch.
func scaledMidMigration(t *testing.T, ctx context.Context, jobID string) (*checkpointedJob, control.Deployment) {
	t.Helper()
	// Many keys, so most of those seen before the rescale are not seen
	// again for a long time: fetch-on-demand leaves them on the old owners.
	j := startCheckpointedJob(t, ctx, jobID, 40000, map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand})
	waitForSink(t, ctx, j.acts, j.dep, 3000)
	j.checkpoint(t, 1)
	st := sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+2000)
	scaled := reconfigure(t, j.acts, workflows.ReconfigureLazy, j.dep, j.workers, j.job.JobID+"-r1", 4)
	j.dep = scaled
	st = sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+2000) // some keys fetched
	if pending := kltPending(t, ctx, j.acts, scaled); pending == 0 {
		t.Fatalf("no key left to migrate after the scale-out: the checkpoint would not be mid-migration")
	}
	return j, scaled
}

// TestRecoverLostWorkerMidMigration checkpoints a job while a lazy
// fetch-on-demand 2→4 scale-out of the counter still has many keys to
// fetch, lets it fetch more, kills a worker with keys still unfetched and
// recovers from that checkpoint: the four-task deployment runs again with
// no key left remote, and the sink matches the oracle — keys fetched
// before the checkpoint, after it, and never.
func TestRecoverLostWorkerMidMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	j, scaled := scaledMidMigration(t, ctx, "ckpt-midmig")
	cp := j.checkpointMidMigration(t, scaled, 2)
	atCheckpoint := kltPending(t, ctx, j.acts, scaled)
	if atCheckpoint == 0 {
		t.Fatalf("migration ended by the checkpoint: it would not cover keys still remote")
	}
	st := sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+2000) // fetches after the checkpoint
	pending := kltPending(t, ctx, j.acts, scaled)
	if pending == 0 || pending >= atCheckpoint {
		t.Fatalf("%d keys to migrate at the checkpoint, %d at the loss: want fewer but some", atCheckpoint, pending)
	}
	victim := victimWorker(t, scaled, j.prod.WorkerID)
	t.Logf("killing %s with %d keys still to migrate (%d at the checkpoint)", victim, pending, atCheckpoint)
	rec := j.recover(t, victim)
	if rec.CheckpointID != cp.CheckpointID {
		t.Fatalf("recovered from %s, want %s (taken during the migration)", rec.CheckpointID, cp.CheckpointID)
	}
	if got := len(rec.Deployment.TasksOf("counter")); got != 4 {
		t.Fatalf("recovered deployment has %d counter tasks, want the checkpoint's 4", got)
	}
	if left := kltPending(t, ctx, j.acts, rec.Deployment); left != 0 {
		t.Fatalf("%d lookup entries after the recovery, want 0 (resolved at restore)", left)
	}
	j.finishExact(t, ctx, victim)
}

// TestCheckpointMidMigrationMatchesOracle checks the content of a
// checkpoint taken while a lazy fetch-on-demand scale-out still has many
// keys on the old owners: loaded into fresh tasks of the deployment, every
// key's count is in exactly one counter task and equals the count of its
// records before the checkpoint's offsets.
func TestCheckpointMidMigrationMatchesOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	j, scaled := scaledMidMigration(t, ctx, "ckpt-midmig-content")
	cp := j.checkpointMidMigration(t, scaled, 2)
	pending := kltPending(t, ctx, j.acts, scaled)
	if pending == 0 {
		t.Fatalf("migration ended by the checkpoint: it would not cover keys still remote")
	}
	oracle, records := oracleUpTo(t, ctx, j, cp.Offsets)

	_, err := j.acts.StopProducer(ctx, j.prod)
	must(t, err)
	must(t, j.acts.StopTasks(ctx, activities.TasksInput{Deployment: scaled}))
	must(t, j.acts.DeployTasks(ctx, activities.TasksInput{Deployment: scaled, StartOffsets: cp.Offsets}))
	t.Cleanup(func() { _ = j.acts.StopTasks(context.Background(), activities.TasksInput{Deployment: scaled}) })
	_, err = j.acts.RestoreCheckpoint(ctx, activities.RestoreInput{Deployment: scaled, CheckpointID: cp.CheckpointID})
	must(t, err)
	if left := kltPending(t, ctx, j.acts, scaled); left != 0 {
		t.Fatalf("%d lookup entries after the restore, want 0", left)
	}
	got := restoredCounterState(t, ctx, j, scaled)
	assertMatchesOracle(t, got, oracle, records)
	t.Logf("%d records, %d keys exact in the restored state; %d keys were still to fetch after the checkpoint", records, len(oracle), pending)
}

// restoredCounterState snapshots the deployed, restored (not started)
// counter tasks and reads every key's count; a key in two tasks fails.
func restoredCounterState(t *testing.T, ctx context.Context, j *checkpointedJob, dep control.Deployment) map[string]uint64 {
	t.Helper()
	dir := t.TempDir()
	for _, w := range dep.Workers() {
		var ids []string
		for _, task := range dep.TasksOf("counter") {
			if task.WorkerID == w {
				ids = append(ids, task.ID)
			}
		}
		if len(ids) == 0 {
			continue
		}
		data, err := control.NewEnvelope(dep.Job.JobID, "", control.SnapshotRequest{TaskIDs: ids, Dir: dir})
		must(t, err)
		msg, err := j.acts.NC.RequestWithContext(ctx, control.WorkerSubject(w, control.VerbSnapshotSave), data)
		must(t, err)
		var rep control.SnapshotReply
		must(t, decodeReply(msg.Data, &rep))
	}
	out, where := map[string]uint64{}, map[string]string{}
	for _, task := range dep.TasksOf("counter") {
		restored := filepath.Join(t.TempDir(), task.ID)
		must(t, statesvc.RestoreCheckpoint(filepath.Join(dir, task.ID, checkpoint.SnapshotStateDir), restored))
		st, err := statesvc.Open(statesvc.Options{Backend: statesvc.BackendPebble, Dir: restored})
		must(t, err)
		prefix := statesvc.OperatorPrefix("counter")
		must(t, st.Scan(prefix, statesvc.PrefixEnd(prefix), func(k, v []byte) bool {
			_, _, state, user, err := statesvc.ParseStateKey(k)
			must(t, err)
			if state == "count" && len(v) == 8 {
				if other, dup := where[string(user)]; dup {
					t.Errorf("key %s restored into %s and %s", user, other, task.ID)
				}
				out[string(user)], where[string(user)] = binary.LittleEndian.Uint64(v), task.ID
			}
			return true
		}))
		must(t, st.Close())
	}
	return out
}
