package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/produce"
	"koala/statesvc"
	"koala/workflows"
	"koala/workflows/plan"
)

// kindsRun is a keyed counter on an in-process cluster fed by a generator
// the test can recompute (the oracle).
type kindsRun struct {
	t       *testing.T
	ctx     context.Context
	acts    *activities.Activities
	job     control.JobSpec
	dep     control.Deployment
	workers []control.WorkerInfo
	prod    activities.ProducerInput
	keyOf   func(n int64) string // key of record n
}

const kindsNumKeys, kindsSeed = 3000, 11

// startKinds deploys source → counter(p) → sink with the lazy protocol's
// job parameters and starts a producer: uniform keys (skew 0) or Zipf.
func startKinds(t *testing.T, name string, p int, mode string, skew float64) *kindsRun {
	t.Helper()
	c := dptest.Start(t, dptest.Options{Workers: 3})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	must(t, err)
	job, dep := startJob(t, ctx, acts, workers, activities.JobInput{
		JobID: "kinds-" + name, Query: "counter", Parallelism: map[string]int{"counter": p},
		NumBuckets: 64, BatchSize: 200, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: statesvc.BackendPebble,
		Params: map[string]string{control.ParamMigrationMode: mode, control.ParamGradualBatchSize: "100"},
	})
	req := control.ProduceRequest{Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, RatePerSec: 5000, NumKeys: kindsNumKeys, Seed: kindsSeed}
	r := &kindsRun{t: t, ctx: ctx, acts: acts, job: job, dep: dep, workers: workers}
	if skew > 0 {
		req.Generator, req.Skew = produce.ZipfGenerator, skew
		z, err := produce.NewZipfKeys(kindsNumKeys, skew)
		must(t, err)
		r.keyOf = func(n int64) string { return produce.KeyName(z.Index(kindsSeed, n)) }
	} else {
		r.keyOf = func(n int64) string { return produce.KeyName(produce.UniformKeyIndex(kindsSeed, kindsNumKeys, n)) }
	}
	r.prod = activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: req}
	must(t, acts.StartProducer(ctx, r.prod))
	waitForSink(t, ctx, acts, dep, 4000)
	return r
}

// run executes one reconfiguration workflow with spec and installs its result.
func (r *kindsRun) run(wf any, id string, spec workflows.ReconfigSpec) workflows.ReconfigureResult {
	r.t.Helper()
	res, err := runReconfig(r.t, r.acts, wf, r.dep, r.workers, id, spec)
	if err != nil {
		r.t.Fatalf("reconfiguration %s (%s): %v", id, spec.Type, err)
	}
	r.dep = res.Deployment
	return res
}

// runReconfig runs one reconfiguration workflow of any kind with the real
// activities and returns its result and error.
func runReconfig(t *testing.T, acts *activities.Activities, wf any, dep control.Deployment, workers []control.WorkerInfo, id string, spec workflows.ReconfigSpec) (workflows.ReconfigureResult, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute}) // loaded machines
	env.SetTestTimeout(2 * time.Minute)
	env.RegisterActivity(acts)
	env.ExecuteWorkflow(wf, workflows.ReconfigureInput{ReconfigID: id, Current: dep, Workers: workers, Spec: spec})
	if !env.IsWorkflowCompleted() {
		t.Fatalf("reconfiguration %s did not complete", id)
	}
	var res workflows.ReconfigureResult
	if err := env.GetWorkflowError(); err != nil {
		return res, err
	}
	must(t, env.GetWorkflowResult(&res))
	return res, nil
}

// more waits for n more records at the sink.
func (r *kindsRun) more(n uint64) {
	r.t.Helper()
	st := sinkStatus(r.t, r.ctx, r.acts, r.dep)
	waitForSink(r.t, r.ctx, r.acts, r.dep, st.SinkReceived+n)
}

// finish stops the input, drains, and compares every key's count at the
// sink with the oracle.
func (r *kindsRun) finish(what string) {
	t := r.t
	t.Helper()
	rep, err := r.acts.StopProducer(r.ctx, r.prod)
	must(t, err)
	if rep.Failed != 0 || rep.Acked == 0 {
		t.Fatalf("producer: acked %d failed %d", rep.Acked, rep.Failed)
	}
	ends, err := r.acts.EndOffsets(r.ctx, r.job)
	must(t, err)
	_, err = r.acts.FinishAndDrain(r.ctx, activities.DrainInput{Deployment: r.dep, BarrierID: r.job.JobID + "-eos", EndOffsets: ends, TimeoutSecs: 60})
	must(t, err)
	counts, err := r.acts.CollectSinkCounts(r.ctx, r.dep)
	must(t, err)
	if counts.Distinct != uint64(rep.Acked) || counts.Duplicates != 0 || counts.Received != uint64(rep.Acked) {
		t.Fatalf("sink ledger: received %d distinct %d duplicates %d; producer acked %d", counts.Received, counts.Distinct, counts.Duplicates, rep.Acked)
	}
	oracle := map[string]uint64{}
	for n := int64(0); n < rep.Acked; n++ {
		oracle[r.keyOf(n)]++
	}
	assertMatchesOracle(t, sinkStatus(t, r.ctx, r.acts, r.dep, true).KeyValues, oracle, rep.Acked)
	t.Logf("%s: %d records, %d keys exact", what, rep.Acked, len(oracle))
	must(t, r.acts.StopTasks(r.ctx, activities.TasksInput{Deployment: r.dep}))
}

// recordsIn reads records_in of every task of op, asking each worker for
// its own tasks.
func (r *kindsRun) recordsIn(op string) map[string]uint64 {
	r.t.Helper()
	byWorker := map[string][]string{}
	for _, x := range r.dep.TasksOf(op) {
		byWorker[x.WorkerID] = append(byWorker[x.WorkerID], x.ID)
	}
	out := map[string]uint64{}
	for w, ids := range byWorker {
		data, err := control.NewEnvelope(r.job.JobID, "", control.TasksRequest{TaskIDs: ids})
		must(r.t, err)
		msg, err := r.acts.NC.RequestWithContext(r.ctx, control.WorkerSubject(w, control.VerbStatus), data)
		must(r.t, err)
		var st control.StatusReply
		must(r.t, decodeReply(msg.Data, &st))
		for _, s := range st.Tasks {
			out[s.TaskID] = s.RecordsIn
		}
	}
	return out
}

// inputSpread measures max/min of the records each task of op received in
// a window of the given length.
func (r *kindsRun) inputSpread(op string, window time.Duration) (float64, map[string]uint64) {
	r.t.Helper()
	a := r.recordsIn(op)
	time.Sleep(window)
	b := r.recordsIn(op)
	delta := map[string]uint64{}
	mx, mn := 0.0, math.Inf(1)
	for id, v := range b {
		d := v - a[id]
		delta[id] = d
		mx, mn = max(mx, float64(d)), min(mn, float64(d))
	}
	if mn == 0 {
		return math.Inf(1), delta
	}
	return mx / mn, delta
}

// TestRebalanceUnderSkewExactAndEvener rebalances a counter fed by a Zipf
// generator with the lazy protocol, planned from the load the declared
// distribution implies, and checks exactness and that the per-task input
// spread (max/min records_in over a window) drops.
func TestRebalanceUnderSkewExactAndEvener(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const skew = 1.2
	r := startKinds(t, "rebalance", 3, control.ModeEventual, skew)
	z, err := produce.NewZipfKeys(kindsNumKeys, skew)
	must(t, err)
	load := z.BucketLoad(r.job.NumBuckets)
	before, dBefore := r.inputSpread("counter", 2*time.Second)
	planned := plan.LoadSpread(r.dep, "counter", load)
	res := r.run(workflows.ReconfigureLazy, r.job.JobID+"-rebalance", workflows.ReconfigSpec{Type: plan.KindRebalance, TargetOperator: "counter", BucketLoad: load})
	if got := len(r.dep.TasksOf("counter")); got != 3 {
		t.Fatalf("rebalance changed parallelism to %d", got)
	}
	r.more(2000)
	after, dAfter := r.inputSpread("counter", 2*time.Second)
	t.Logf("rebalance steps: %v", stepNames(res.Steps))
	t.Logf("planned spread %.3f → %.3f; measured records_in per task over 2 s: before %v (max/min %.3f), after %v (max/min %.3f)",
		planned, plan.LoadSpread(r.dep, "counter", load), dBefore, before, dAfter, after)
	if !(after < before) {
		t.Errorf("per-task input spread did not drop: %.3f → %.3f", before, after)
	}
	r.finish("rebalance under zipf skew")
}

// TestRebalanceFromMeasuredLoad rebalances a Zipf-fed counter without a
// declared load: the plan step measures records per bucket on the running
// tasks. The result must be exact and the per-task input spread must drop.
func TestRebalanceFromMeasuredLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	r := startKinds(t, "rebalance-measured", 3, control.ModeEventual, 1.2)
	before, dBefore := r.inputSpread("counter", 2*time.Second)
	oldTable, _ := r.dep.Table("counter")
	res := r.run(workflows.ReconfigureLazy, r.job.JobID+"-rebalance", workflows.ReconfigSpec{Type: plan.KindRebalance, TargetOperator: "counter"})
	newTable, _ := r.dep.Table("counter")
	moved := 0
	for b := range oldTable.Buckets {
		if oldTable.Buckets[b] != newTable.Buckets[b] {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("the measured rebalance moved no bucket")
	}
	r.more(2000)
	after, dAfter := r.inputSpread("counter", 2*time.Second)
	t.Logf("rebalance from measured load: steps %v, %d buckets moved; records_in per task over 2 s: before %v (max/min %.3f), after %v (max/min %.3f)",
		stepNames(res.Steps), moved, dBefore, before, dAfter, after)
	if !(after < before) {
		t.Errorf("per-task input spread did not drop: %.3f → %.3f", before, after)
	}
	r.finish("rebalance from measured load")
}

// TestTaskMigrationExact migrates a counter task to another worker with
// the lazy protocol (two reconfigurations, see plan.MigrateTask) while
// records flow, and checks the buckets moved with it and exactness.
func TestTaskMigrationExact(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	for _, task := range []string{"counter-0", "counter-1"} {
		t.Run(task, func(t *testing.T) {
			r := startKinds(t, "migrate-"+task, 2, control.ModeEventual, 0)
			var from control.TaskRef
			for _, x := range r.dep.Tasks {
				if x.ID == task {
					from = x
				}
			}
			var to string
			for _, w := range r.workers {
				if w.ID != from.WorkerID && !slices.ContainsFunc(r.dep.TasksOf("counter"), func(x control.TaskRef) bool { return x.WorkerID == w.ID }) {
					to = w.ID
				}
			}
			if to == "" {
				to = r.workers[0].ID
				if to == from.WorkerID {
					to = r.workers[1].ID
				}
			}
			oldTable, _ := r.dep.Table("counter")
			spec := workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: task, TargetWorker: to}
			for step := 1; step <= 2; step++ {
				res := r.run(workflows.ReconfigureLazy, fmt.Sprintf("%s-m%d", r.job.JobID, step), spec)
				t.Logf("step %d: %v; counter tasks %v", step, stepNames(res.Steps), r.dep.TasksOf("counter"))
			}
			if _, pending, _ := plan.Pending(r.dep, "counter"); pending {
				t.Fatal("migration still pending")
			}
			tasks := r.dep.TasksOf("counter")
			moved := tasks[len(tasks)-1]
			if moved.WorkerID != to || len(tasks) != 2 {
				t.Fatalf("after migration: counter tasks %v, want the last one on %s", tasks, to)
			}
			newTable, _ := r.dep.Table("counter")
			for b, owner := range oldTable.Buckets {
				if owner == from.Index && newTable.Buckets[b] != moved.Index {
					t.Fatalf("bucket %d of %s is now on task %d, want %s", b, task, newTable.Buckets[b], moved.ID)
				}
			}
			// A third request has nothing pending and the task is where it should be.
			if _, err := runReconfig(t, r.acts, workflows.ReconfigureLazy, r.dep, r.workers, r.job.JobID+"-m3",
				workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: moved.ID, TargetWorker: to}); err == nil || !strings.Contains(err.Error(), "is already on worker") {
				t.Fatalf("migrating to the current worker: %v", err)
			}
			r.more(3000)
			r.finish("task migration of " + task)
		})
	}
}

// TestRepeatedReconfigurationsExact scales 2→3→4→3 and rebalances, back
// to back while records flow: each reconfiguration starts as soon as the
// previous workflow returns, which under fetch-on-demand is right after
// the route swap, so the previous migration may still be pulling keys.
// This is what RunExperiment does with overlapping triggers (they queue).
func TestRepeatedReconfigurationsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	for _, mode := range []string{control.ModeFetchOnDemand, control.ModeEventual} {
		t.Run(mode, func(t *testing.T) {
			r := startKinds(t, "repeat-"+mode, 2, mode, 1.0)
			z, err := produce.NewZipfKeys(kindsNumKeys, 1.0)
			must(t, err)
			specs := []workflows.ReconfigSpec{
				{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: 3},
				{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: 4},
				{Type: plan.KindScaleDown, TargetOperator: "counter", TargetParallelism: 3},
				{Type: plan.KindRebalance, TargetOperator: "counter", BucketLoad: z.BucketLoad(r.job.NumBuckets)},
			}
			for i, spec := range specs {
				r.run(workflows.ReconfigureLazy, fmt.Sprintf("%s-r%d", r.job.JobID, i+1), spec)
			}
			if got := len(r.dep.TasksOf("counter")); got != 3 {
				t.Fatalf("%d counter tasks, want 3", got)
			}
			r.more(3000)
			r.finish("2→3→4→3 + rebalance back to back, " + mode)
		})
	}
}

// TestInvalidKindsFailNonRetryable checks that rejected requests fail the
// workflow with a non-retryable error naming the reason.
func TestInvalidKindsFailNonRetryable(t *testing.T) {
	ws := []control.WorkerInfo{{ID: "w1", DataAddr: "a1"}, {ID: "w2", DataAddr: "a2"}}
	job := control.JobSpec{JobID: "j", NumBuckets: 8, Operators: []control.OperatorSpec{
		{Name: "source", Kind: "kafka-source", Parallelism: 1},
		{Name: "counter", Kind: "keyed-counter", Parallelism: 2, Inputs: []string{"source"}, Keyed: true, Stateful: true},
		{Name: "sink", Kind: "collect-sink", Parallelism: 1, Inputs: []string{"counter"}},
	}}
	dep, err := plan.Initial(job, ws)
	must(t, err)
	acts := &activities.Activities{}
	for _, tc := range []struct {
		spec workflows.ReconfigSpec
		want string
	}{
		{workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: 0}, "target parallelism 0"},
		{workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: 9}, "must be between 1 and NumBuckets (8)"},
		{workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "nope", TargetParallelism: 3}, `operator "nope" not found`},
		{workflows.ReconfigSpec{Type: plan.KindRebalance, TargetOperator: "counter", BucketLoad: []float64{1, 2, 3}}, "bucket load has 3 entries, job has NumBuckets 8"},
		{workflows.ReconfigSpec{Type: plan.KindRebalance, TargetOperator: "counter", BucketLoad: []float64{1, 1, 1, 1, 1, 1, 1, 1}}, "no bucket move lowers the spread"},
		{workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: "counter-9", TargetWorker: "w1"}, `task "counter-9" not found`},
		{workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: "counter-0", TargetWorker: "w9"}, `target worker "w9" is unknown`},
		{workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: "counter-0", TargetWorker: dep.TasksOf("counter")[0].WorkerID}, "is already on worker"},
		{workflows.ReconfigSpec{Type: "shuffle", TargetOperator: "counter"}, `reconfiguration type "shuffle" is unknown`},
	} {
		for _, wf := range []any{workflows.ReconfigureLazy, workflows.ReconfigureStopAndRestart, workflows.ReconfigureDRRS} {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute}) // loaded machines
			env.RegisterActivity(acts)
			env.ExecuteWorkflow(wf, workflows.ReconfigureInput{ReconfigID: "bad", Current: dep, Workers: ws, Spec: tc.spec})
			err := env.GetWorkflowError()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s %+v: err %v, want %q", fmt.Sprintf("%T", wf), tc.spec, err, tc.want)
			}
			if appErr := invalidReconfiguration(err); appErr == nil || !appErr.NonRetryable() {
				t.Fatalf("%+v: want a non-retryable InvalidReconfiguration error, got %v", tc.spec, err)
			}
		}
	}
}

func stepNames(steps []workflows.StepTiming) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = fmt.Sprintf("%s(%.0fms)", s.Step, s.Millis)
	}
	return out
}

// invalidReconfiguration finds the InvalidReconfiguration application
// error in err's chain (the step runner wraps it with the step name).
func invalidReconfiguration(err error) *temporal.ApplicationError {
	for ; err != nil; err = errors.Unwrap(err) {
		var appErr *temporal.ApplicationError
		if errors.As(err, &appErr) && appErr.Type() == "InvalidReconfiguration" {
			return appErr
		}
		if appErr != nil {
			err = appErr
		}
	}
	return nil
}

// TestKindsOnOtherProtocols runs a task migration (both steps) and then a
// rebalance under skew with the stop-and-restart and DRRS workflows: the
// plans are ordinary one-operator plans, so they execute unchanged.
func TestKindsOnOtherProtocols(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	for _, tc := range []struct {
		name string
		wf   any
	}{{"stop-and-restart", workflows.ReconfigureStopAndRestart}, {"drrs", workflows.ReconfigureDRRS}} {
		t.Run(tc.name, func(t *testing.T) {
			r := startKinds(t, "other-"+tc.name, 3, control.ModeEventual, 1.2)
			z, err := produce.NewZipfKeys(kindsNumKeys, 1.2)
			must(t, err)
			target := r.workers[0].ID
			if r.dep.TasksOf("counter")[0].WorkerID == target {
				target = r.workers[1].ID
			}
			mig := workflows.ReconfigSpec{Type: plan.KindTaskMigration, TaskID: "counter-0", TargetWorker: target}
			r.run(tc.wf, r.job.JobID+"-m1", mig)
			r.run(tc.wf, r.job.JobID+"-m2", mig)
			r.more(2000)
			r.run(tc.wf, r.job.JobID+"-rb", workflows.ReconfigSpec{Type: plan.KindRebalance, TargetOperator: "counter", BucketLoad: z.BucketLoad(r.job.NumBuckets)})
			r.more(2000)
			r.finish("migration + rebalance with " + tc.name)
		})
	}
}

// TestRunExperimentValidatesKinds: RunExperiment rejects a task-migration
// with no task and a scale-up with no parallelism, naming the entry and
// reason; a rebalance with no load is valid (the plan step measures it).
func TestRunExperimentValidatesKinds(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute}) // loaded machines
	env.ExecuteWorkflow(workflows.RunExperiment, workflows.ExperimentInput{
		QueryName: "counter", TotalRuntimeSeconds: 60, KafkaBrokers: []string{"k:9092"},
		Reconfigurations: []workflows.ReconfigSpec{
			{TriggerTimeSeconds: 10, Type: plan.KindRebalance, TargetOperator: "counter"},
			{TriggerTimeSeconds: 20, Type: plan.KindTaskMigration, TargetWorker: "w1"},
			{TriggerTimeSeconds: 30, Type: plan.KindScaleUp, TargetOperator: "counter"},
		},
	})
	err := env.GetWorkflowError()
	if err != nil && strings.Contains(err.Error(), "Reconfigurations[0]") {
		t.Errorf("a rebalance without BucketLoad was rejected: %v", err)
	}
	for _, want := range []string{
		"Reconfigurations[1]: task-migration needs TargetOperator (its task and worker are then chosen) or TaskID",
		"Reconfigurations[2].TargetParrallelism 0 must be ≥ 1",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err %v, want it to contain %q", err, want)
		}
	}
}
