package workflows_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/produce"
	"koala/queries"
	"koala/statesvc"
	"koala/workflows"
	"koala/workflows/plan"
)

// The query is queries' "two-counters": source → counter (keyed by the
// input key) → group-sum (keyed by the key's group) → sink. The counter
// emits each record under its group with the key's running count as
// value; group-sum adds those counts per group. The sink keeps the largest
// (latest) sum per group, which after the run must be Σ n(n+1)/2 over the
// group's keys, n being a key's number of records: a lost, duplicated or
// miscounted record of either operator changes it.
const queryTwoCounters = "two-counters"

func groupOf(key string) string { return string(queries.GroupOf([]byte(key))) }

// TestTwoOperatorsReconfiguredConcurrentlyExact reconfigures both keyed
// operators of the two-counter query at the same time with the lazy
// protocol, three times (2→4 and 2→3, then 4→2 and 3→2, then 2→1 and
// 2→3: an upstream scale-in beside a downstream scale-out, where the old
// counter tasks leave while the new group-sum task is made), while records
// flow, and checks the sink against the oracle: every record once, every
// group's sum exact.
func TestTwoOperatorsReconfiguredConcurrentlyExact(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	for _, mode := range []string{control.ModeEventual, control.ModeFetchOnDemand} {
		t.Run(mode, func(t *testing.T) { runConcurrentExactness(t, mode) })
	}
}

func runConcurrentExactness(t *testing.T, mode string) {
	c := dptest.Start(t, dptest.Options{Workers: 3})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	must(t, err)
	job, dep := startJob(t, ctx, acts, workers, activities.JobInput{
		JobID: "concurrent-" + mode, Query: queryTwoCounters, Parallelism: map[string]int{"counter": 2, "groupsum": 2},
		NumBuckets: 64, BatchSize: 200, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: statesvc.BackendPebble,
		Params: map[string]string{control.ParamMigrationMode: mode, control.ParamGradualBatchSize: "100"},
	})
	const numKeys, seed = 3000, 5
	prod := activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
		Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, RatePerSec: 5000, NumKeys: numKeys, Seed: seed,
	}}
	must(t, acts.StartProducer(ctx, prod))
	waitForSink(t, ctx, acts, dep, 4000)

	rounds := []map[string]int{{"counter": 4, "groupsum": 3}, {"counter": 2, "groupsum": 2}, {"counter": 1, "groupsum": 3}}
	for round, target := range rounds {
		dep = reconfigureConcurrently(t, acts, dep, workers, fmt.Sprintf("%s-round%d", job.JobID, round+1), target)
		for op, p := range target {
			if got := len(dep.TasksOf(op)); got != p {
				t.Fatalf("round %d: %d %s tasks, want %d", round+1, got, op, p)
			}
		}
		st := sinkStatus(t, ctx, acts, dep)
		waitForSink(t, ctx, acts, dep, st.SinkReceived+4000)
	}

	rep := stopAndCheckLedger(t, ctx, acts, job, dep, prod)

	perKey := map[string]uint64{}
	for n := int64(0); n < rep.Acked; n++ {
		perKey[produce.KeyName(produce.UniformKeyIndex(seed, numKeys, n))]++
	}
	oracle := map[string]uint64{}
	for k, n := range perKey {
		oracle[groupOf(k)] += n * (n + 1) / 2
	}
	assertMatchesOracle(t, sinkStatus(t, ctx, acts, dep, true).KeyValues, oracle, rep.Acked)
	t.Logf("%s: %d records, %d keys in %d groups exact after %d concurrent rounds", mode, rep.Acked, len(perKey), len(oracle), len(rounds))
}

// reconfigureConcurrently runs one lazy reconfiguration per operator of
// target at the same time, each planned from dep as RunExperiment plans
// concurrent children, checks that they overlapped, and merges their
// results as RunExperiment does.
func reconfigureConcurrently(t *testing.T, acts *activities.Activities, dep control.Deployment, workers []control.WorkerInfo, id string, target map[string]int) control.Deployment {
	t.Helper()
	type run struct {
		op         string
		res        workflows.ReconfigureResult
		err        error
		start, end time.Time
	}
	runs := []*run{{op: "counter"}, {op: "groupsum"}}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetTestTimeout(2 * time.Minute)
			env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
			env.RegisterActivity(acts)
			r.start = time.Now()
			env.ExecuteWorkflow(workflows.ReconfigureLazy, workflows.ReconfigureInput{
				ReconfigID: id + "-" + r.op, Current: dep, Workers: workers,
				Spec: workflows.ReconfigSpec{TargetOperator: r.op, TargetParallelism: target[r.op]},
			})
			r.end = time.Now()
			switch {
			case !env.IsWorkflowCompleted():
				r.err = fmt.Errorf("did not complete")
			case env.GetWorkflowError() != nil:
				r.err = env.GetWorkflowError()
			default:
				r.err = env.GetWorkflowResult(&r.res)
			}
		}()
	}
	wg.Wait()
	for _, r := range runs {
		if r.err != nil {
			t.Fatalf("%s: reconfiguration of %s: %v", id, r.op, r.err)
		}
	}
	a, b := runs[0], runs[1]
	if !a.start.Before(b.end) || !b.start.Before(a.end) {
		t.Fatalf("%s: the reconfigurations did not overlap: %s ran %s–%s, %s ran %s–%s", id,
			a.op, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli), b.op, b.start.Format(time.StampMilli), b.end.Format(time.StampMilli))
	}
	for _, r := range runs {
		dep = plan.Merge(dep, r.res.Deployment)
	}
	must(t, plan.Validate(dep))
	return dep
}
