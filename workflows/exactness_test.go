package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/produce"
	_ "koala/queries"
	"koala/statesvc"
	"koala/workflows"
	"koala/workflows/plan"
)

// exactnessCase is one protocol configuration of the keyed-counter test.
type exactnessCase struct {
	name     string
	protocol any // reconfiguration workflow function
	backend  string
	mode     string
	gradual  int
}

// TestKeyedCounterExactAcrossRescales runs a keyed counter over generated
// input, scales it 2→4, 4→2 and 2→4 again while records flow (the last
// move gives away again buckets that came back, with whatever keys of
// theirs the other task never took), and compares the count of every key
// at the sink with an oracle recomputed from the generator.
func TestKeyedCounterExactAcrossRescales(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	// Every protocol on every state backend. Lazy runs both migration modes.
	type proto struct {
		name    string
		fn      any
		mode    string
		gradual int
	}
	protocols := []proto{
		{"lazy-fetch-on-demand", workflows.ReconfigureLazy, control.ModeFetchOnDemand, 100},
		{"lazy-eventual", workflows.ReconfigureLazy, control.ModeEventual, 100},
		{"lazy-eventual-all-at-once", workflows.ReconfigureLazy, control.ModeEventual, -1},
		{"stop-and-restart", workflows.ReconfigureStopAndRestart, control.ModeEventual, -1},
		{"drrs", workflows.ReconfigureDRRS, control.ModeEventual, -1},
	}
	var cases []exactnessCase
	for _, p := range protocols {
		for _, backend := range []string{statesvc.BackendPebble, statesvc.BackendMemory, statesvc.BackendRemotePebble} {
			cases = append(cases, exactnessCase{name: p.name + "-" + backend, protocol: p.fn, backend: backend, mode: p.mode, gradual: p.gradual})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runExactness(t, tc) })
	}
}

func runExactness(t *testing.T, tc exactnessCase) {
	params := map[string]string{control.ParamMigrationMode: tc.mode, control.ParamGradualBatchSize: strconv.Itoa(tc.gradual)}
	if tc.backend == statesvc.BackendRemotePebble {
		// Started before the cluster so it stops after the workers.
		srv, err := statesvc.NewServer(statesvc.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
		must(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		params[control.ParamRemotePebbleAddrs] = srv.Addr()
	}
	c := dptest.Start(t, dptest.Options{Workers: 3})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	must(t, err)
	job, dep := startJob(t, ctx, acts, workers, activities.JobInput{
		JobID: "exact-" + tc.name, Query: "counter", Parallelism: map[string]int{"counter": 2},
		NumBuckets: 64, BatchSize: 200, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: tc.backend,
		Params: params,
	})
	const numKeys, seed = 3000, 7
	prod := activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
		Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, RatePerSec: 5000, NumKeys: numKeys, Seed: seed,
	}}
	must(t, acts.StartProducer(ctx, prod))

	waitForSink(t, ctx, acts, dep, 4000)
	for i, p := range []int{4, 2, 4} {
		dep = reconfigure(t, acts, tc.protocol, dep, workers, fmt.Sprintf("%s-r%d", job.JobID, i+1), p)
		if got := len(dep.TasksOf("counter")); got != p {
			t.Fatalf("after reconfiguration %d: %d counter tasks, want %d", i+1, got, p)
		}
		st := sinkStatus(t, ctx, acts, dep)
		waitForSink(t, ctx, acts, dep, st.SinkReceived+4000)
	}

	rep := stopAndCheckLedger(t, ctx, acts, job, dep, prod)

	oracle := map[string]uint64{}
	for n := int64(0); n < rep.Acked; n++ {
		oracle[produce.KeyName(produce.UniformKeyIndex(seed, numKeys, n))]++
	}
	assertMatchesOracle(t, sinkStatus(t, ctx, acts, dep, true).KeyValues, oracle, rep.Acked)
	t.Logf("%s: %d records, %d keys exact after 2→4→2→4", tc.name, rep.Acked, len(oracle))
}

// assertMatchesOracle fails the test unless the sink's per-key counts equal
// the oracle's exactly (no key missing, none extra, none off by any amount).
func assertMatchesOracle(t *testing.T, got, oracle map[string]uint64, records int64) {
	t.Helper()
	wrong := 0
	for k, want := range oracle {
		if got[k] != want {
			if wrong < 5 {
				t.Errorf("key %s: count %d at the sink, oracle %d", k, got[k], want)
			}
			wrong++
		}
	}
	if len(got) != len(oracle) {
		t.Errorf("sink has %d keys, oracle %d", len(got), len(oracle))
	}
	if wrong > 0 {
		t.Fatalf("%d of %d keys differ from the oracle (%d records)", wrong, len(oracle), records)
	}
}

// reconfigure runs one reconfiguration workflow with the real activities
// against the in-process cluster and returns the new deployment.
func reconfigure(t *testing.T, acts *activities.Activities, wf any, dep control.Deployment, workers []control.WorkerInfo, id string, p int) control.Deployment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivity(acts)
	env.ExecuteWorkflow(wf, workflows.ReconfigureInput{
		ReconfigID: id, Current: dep, Workers: workers,
		Spec: workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: p},
	})
	if !env.IsWorkflowCompleted() {
		t.Fatalf("reconfiguration %s did not complete", id)
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("reconfiguration %s: %v", id, err)
	}
	var res workflows.ReconfigureResult
	must(t, env.GetWorkflowResult(&res))
	for _, m := range res.Moves {
		t.Logf("%s %s: state moved %s", id, m.Step, m.Summary)
	}
	return res.Deployment
}

func sinkStatus(t *testing.T, ctx context.Context, acts *activities.Activities, dep control.Deployment, withValues ...bool) control.TaskStatus {
	t.Helper()
	sink := dep.TasksOf("sink")[0]
	var st control.StatusReply
	data, err := control.NewEnvelope(dep.Job.JobID, "", control.TasksRequest{TaskIDs: []string{sink.ID}, WithValues: len(withValues) > 0 && withValues[0]})
	must(t, err)
	msg, err := acts.NC.RequestWithContext(ctx, control.WorkerSubject(sink.WorkerID, control.VerbStatus), data)
	must(t, err)
	must(t, decodeReply(msg.Data, &st))
	if len(st.Tasks) != 1 {
		t.Fatalf("status of %s: %d tasks", sink.ID, len(st.Tasks))
	}
	return st.Tasks[0]
}

// waitForSink polls the sink until it received at least n records.
func waitForSink(t *testing.T, ctx context.Context, acts *activities.Activities, dep control.Deployment, n uint64) {
	t.Helper()
	waitForSinkWithin(t, ctx, acts, dep, n, time.Minute)
}

func waitForSinkWithin(t *testing.T, ctx context.Context, acts *activities.Activities, dep control.Deployment, n uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		st := sinkStatus(t, ctx, acts, dep)
		if st.Error != "" {
			t.Fatalf("sink failed: %s", st.Error)
		}
		if st.SinkReceived >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink received %d records, want ≥ %d within %s", st.SinkReceived, n, limit)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func decodeReply(data []byte, out any) error {
	var r control.Reply
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return json.Unmarshal(r.Body, out)
}

// stopAndCheckLedger stops the producer, drains the job and checks the sink
// ledger: every acknowledged record received exactly once. It returns the
// producer's report for the per-key oracle.
func stopAndCheckLedger(t *testing.T, ctx context.Context, acts *activities.Activities, job control.JobSpec, dep control.Deployment, prod activities.ProducerInput) control.ProduceReport {
	t.Helper()
	rep, err := acts.StopProducer(ctx, prod)
	must(t, err)
	if rep.Failed != 0 || rep.Acked == 0 {
		t.Fatalf("producer: acked %d failed %d", rep.Acked, rep.Failed)
	}
	ends, err := acts.EndOffsets(ctx, job)
	must(t, err)
	_, err = acts.FinishAndDrain(ctx, activities.DrainInput{Deployment: dep, BarrierID: job.JobID + "-eos", EndOffsets: ends, TimeoutSecs: 60})
	must(t, err)
	counts, err := acts.CollectSinkCounts(ctx, dep)
	must(t, err)
	if counts.Distinct != uint64(rep.Acked) || counts.Duplicates != 0 || counts.Received != uint64(rep.Acked) {
		t.Fatalf("sink ledger: received %d distinct %d duplicates %d; producer acked %d (lost %d)",
			counts.Received, counts.Distinct, counts.Duplicates, rep.Acked, rep.Acked-int64(counts.Distinct))
	}
	return rep
}

// deployJob builds the job, plans its initial deployment over workers,
// creates its topic and deploys its tasks without starting them.
func deployJob(t *testing.T, ctx context.Context, acts *activities.Activities, workers []control.WorkerInfo, in activities.JobInput) (control.JobSpec, control.Deployment) {
	t.Helper()
	job, err := acts.BuildJob(ctx, in)
	must(t, err)
	dep, err := plan.Initial(job, workers)
	must(t, err)
	must(t, acts.CreateTopic(ctx, job))
	must(t, acts.DeployTasks(ctx, activities.TasksInput{Deployment: dep}))
	return job, dep
}

// startJob is deployJob, then starts the tasks.
func startJob(t *testing.T, ctx context.Context, acts *activities.Activities, workers []control.WorkerInfo, in activities.JobInput) (control.JobSpec, control.Deployment) {
	t.Helper()
	job, dep := deployJob(t, ctx, acts, workers, in)
	must(t, acts.StartTasks(ctx, activities.TasksInput{Deployment: dep}))
	return job, dep
}
