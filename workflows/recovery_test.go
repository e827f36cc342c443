package workflows_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/produce"
	"koala/statesvc"
	"koala/workflows"
)

// checkpointedJob is a running counter job with a checkpoint store, on an
// in-process cluster, fed by one producer on worker w1.
type checkpointedJob struct {
	c       *dptest.Cluster
	acts    *activities.Activities
	workers []control.WorkerInfo
	job     control.JobSpec
	dep     control.Deployment
	prod    activities.ProducerInput
	store   string
	numKeys int
}

const ckptNumKeys, ckptSeed = 2000, 11

func startCheckpointedJob(t *testing.T, ctx context.Context, jobID string, numKeys int, params map[string]string) *checkpointedJob {
	t.Helper()
	return startCheckpointedQuery(t, ctx, jobID, "counter", numKeys, params)
}

// startCheckpointedQuery is startCheckpointedJob for another query with a
// "counter" operator; the topic params[ParamKafkaSinkTopic] names, if
// any, is created first (3 partitions).
func startCheckpointedQuery(t *testing.T, ctx context.Context, jobID, query string, numKeys int, params map[string]string) *checkpointedJob {
	t.Helper()
	c := dptest.Start(t, dptest.Options{Workers: 3})
	if topic := params[control.ParamKafkaSinkTopic]; topic != "" {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
		must(t, err)
		_, err = kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic)
		cl.Close()
		must(t, err)
	}
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}
	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	must(t, err)
	store := filepath.Join(t.TempDir(), "checkpoints")
	p := map[string]string{control.ParamCheckpointStore: store}
	for k, v := range params {
		p[k] = v
	}
	job, dep := startJob(t, ctx, acts, workers, activities.JobInput{
		JobID: jobID, Query: query, Parallelism: map[string]int{"counter": 2},
		NumBuckets: 64, BatchSize: 200, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: statesvc.BackendPebble, Params: p,
	})
	prod := activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
		Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, RatePerSec: 4000, NumKeys: numKeys, Seed: ckptSeed,
	}}
	must(t, acts.StartProducer(ctx, prod))
	return &checkpointedJob{c: c, acts: acts, workers: workers, job: job, dep: dep, prod: prod, store: store, numKeys: numKeys}
}

// runWorkflow runs wf to completion with the real activities.
func runWorkflow(t *testing.T, acts *activities.Activities, wf, in, out any) error {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivity(acts)
	env.ExecuteWorkflow(wf, in)
	if !env.IsWorkflowCompleted() {
		t.Fatalf("workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return err
	}
	if out != nil {
		must(t, env.GetWorkflowResult(out))
	}
	return nil
}

func (j *checkpointedJob) checkpoint(t *testing.T, seq int) workflows.CheckpointJobResult {
	t.Helper()
	var res workflows.CheckpointJobResult
	if err := runWorkflow(t, j.acts, workflows.CheckpointJob, workflows.CheckpointJobInput{Deployment: j.dep, Seq: seq, TimeoutSecs: 30}, &res); err != nil {
		t.Fatalf("checkpoint %d: %v", seq, err)
	}
	t.Logf("checkpoint %s: %.1f ms, %d bytes, max alignment %.1f ms, offsets %v", res.CheckpointID, res.DurationMillis, res.Bytes, res.MaxAlignMillis, res.Offsets)
	return res
}

// oracleUpTo counts the records of each key in the topic below offsets.
func oracleUpTo(t *testing.T, ctx context.Context, j *checkpointedJob, offsets map[int32]int64) (map[string]uint64, int64) {
	t.Helper()
	start := map[int32]kgo.Offset{}
	for p := range offsets {
		start[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(j.job.KafkaBrokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{j.job.Topic: start}))
	must(t, err)
	defer cl.Close()
	out := map[string]uint64{}
	var n int64
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range offsets {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read topic: %v", ctx.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset < offsets[r.Partition] {
				out[string(r.Key)]++
				n++
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return out, n
}

// keyedStateOf reads the "count" state of every key from the Pebble
// checkpoints of the counter tasks' parts.
func keyedStateOf(t *testing.T, j *checkpointedJob, checkpointID string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, task := range j.dep.TasksOf("counter") {
		dir := filepath.Join(j.store, j.job.JobID, checkpointID, task.ID, checkpoint.SnapshotStateDir)
		restored := filepath.Join(t.TempDir(), task.ID)
		must(t, statesvc.RestoreCheckpoint(dir, restored))
		st, err := statesvc.Open(statesvc.Options{Backend: statesvc.BackendPebble, Dir: restored})
		must(t, err)
		prefix := statesvc.OperatorPrefix("counter")
		must(t, st.Scan(prefix, statesvc.PrefixEnd(prefix), func(k, v []byte) bool {
			_, _, state, user, err := statesvc.ParseStateKey(k)
			must(t, err)
			if state == "count" && len(v) == 8 {
				if _, dup := out[string(user)]; dup {
					t.Errorf("key %s has state in two tasks' parts", user)
				}
				out[string(user)] = binary.LittleEndian.Uint64(v)
			}
			return true
		}))
		must(t, st.Close())
	}
	return out
}

// TestCheckpointContentMatchesOracle takes an aligned checkpoint of a
// running keyed counter and checks its content against the input up to
// the offsets it recorded: every key's count in the counter tasks' Pebble
// parts, and the sink's restored ledger and values, loaded into freshly
// deployed tasks of the job.
func TestCheckpointContentMatchesOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	j := startCheckpointedJob(t, ctx, "ckpt-content", ckptNumKeys, nil)
	waitForSink(t, ctx, j.acts, j.dep, 3000)
	cp := j.checkpoint(t, 1)
	oracle, records := oracleUpTo(t, ctx, j, cp.Offsets)
	if records < 3000 {
		t.Fatalf("checkpoint covers %d records, want ≥ 3000 (the sink had seen 3000 before it)", records)
	}
	assertMatchesOracle(t, keyedStateOf(t, j, cp.CheckpointID), oracle, records)

	// Fresh tasks of the same job, loaded from the checkpoint, not started.
	_, err := j.acts.StopProducer(ctx, j.prod)
	must(t, err)
	must(t, j.acts.StopTasks(ctx, activities.TasksInput{Deployment: j.dep}))
	must(t, j.acts.DeployTasks(ctx, activities.TasksInput{Deployment: j.dep, StartOffsets: cp.Offsets}))
	t.Cleanup(func() { _ = j.acts.StopTasks(context.Background(), activities.TasksInput{Deployment: j.dep}) })
	_, err = j.acts.RestoreCheckpoint(ctx, activities.RestoreInput{Deployment: j.dep, CheckpointID: cp.CheckpointID})
	must(t, err)
	st := sinkStatus(t, ctx, j.acts, j.dep, true)
	if st.SinkDistinct != uint64(records) || st.SinkDuplicates != 0 {
		t.Fatalf("restored sink ledger: distinct %d duplicates %d, want %d and 0", st.SinkDistinct, st.SinkDuplicates, records)
	}
	assertMatchesOracle(t, st.KeyValues, oracle, records)
}

// TestRecoverLostWorkerExactlyOnce kills a worker hosting counter tasks
// after a checkpoint completed, recovers the job with RecoverJob on the
// two others and checks the sink at the end: every produced record exactly
// once in the ledger and every key's count equal to the oracle.
func TestRecoverLostWorkerExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	j := startCheckpointedJob(t, ctx, "ckpt-recover", ckptNumKeys, nil)
	waitForSink(t, ctx, j.acts, j.dep, 3000)
	j.checkpoint(t, 1)
	st := sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+3000) // records after the cut, to be replayed

	victim := victimWorker(t, j.dep, j.prod.WorkerID)
	rec := j.recover(t, victim)
	if len(rec.Moved) == 0 {
		t.Fatalf("no task moved off the lost worker %s", victim)
	}
	j.finishExact(t, ctx, victim)
}

// finishExact lets the recovered job process more input, ends it and
// checks the sink: ledger exact and every key's count equal to the oracle.
func (j *checkpointedJob) finishExact(t *testing.T, ctx context.Context, victim string) {
	t.Helper()
	st := sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+3000)
	rep := stopAndCheckLedger(t, ctx, j.acts, j.job, j.dep, j.prod)
	oracle := map[string]uint64{}
	for n := int64(0); n < rep.Acked; n++ {
		oracle[produce.KeyName(produce.UniformKeyIndex(ckptSeed, j.numKeys, n))]++
	}
	assertMatchesOracle(t, sinkStatus(t, ctx, j.acts, j.dep, true).KeyValues, oracle, rep.Acked)
	t.Logf("%d records, %d keys exact after losing %s", rep.Acked, len(oracle), victim)
}

// recover runs RecoverJob after the loss of victim and returns its result.
func (j *checkpointedJob) recover(t *testing.T, victim string) workflows.RecoverJobResult {
	t.Helper()
	j.c.StopWorker(t, slices.IndexFunc(j.workers, func(w control.WorkerInfo) bool { return w.ID == victim }))
	var rec workflows.RecoverJobResult
	began := time.Now()
	must(t, runWorkflow(t, j.acts, workflows.RecoverJob, workflows.RecoverJobInput{
		JobID: j.job.JobID, Store: j.store, Workers: j.workers, Lost: []string{victim},
	}, &rec))
	t.Logf("recovered from %s in %s (wall clock); moved %v off %s", rec.CheckpointID, time.Since(began).Round(time.Millisecond), rec.Moved, victim)
	for _, task := range rec.Deployment.Tasks {
		if task.WorkerID == victim {
			t.Fatalf("task %s still placed on the lost worker", task.ID)
		}
	}
	j.dep = rec.Deployment
	return rec
}

// victimWorker picks a worker that hosts a counter task but not the producer.
func victimWorker(t *testing.T, dep control.Deployment, producerWorker string) string {
	t.Helper()
	for _, task := range dep.TasksOf("counter") {
		if task.WorkerID != producerWorker {
			return task.WorkerID
		}
	}
	t.Fatalf("every counter task runs on the producer's worker %s", producerWorker)
	return ""
}

// kltPending sums the lookup-table entries (keys not yet migrated) of the
// counter tasks.
func kltPending(t *testing.T, ctx context.Context, acts *activities.Activities, dep control.Deployment) int {
	t.Helper()
	total := 0
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
		data, err := control.NewEnvelope(dep.Job.JobID, "", control.TasksRequest{TaskIDs: ids})
		must(t, err)
		msg, err := acts.NC.RequestWithContext(ctx, control.WorkerSubject(w, control.VerbStatus), data)
		must(t, err)
		var st control.StatusReply
		must(t, decodeReply(msg.Data, &st))
		for _, ts := range st.Tasks {
			total += ts.KLTSize
		}
	}
	return total
}
