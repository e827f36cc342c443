package workflows_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/statesvc"
	"koala/workflows"
	"koala/workflows/autoscale"
	"koala/workflows/wftest"
)

// costPerRecord makes every task of one operator take perRecord per
// record: a known true processing rate of 1/perRecord per task.
type costPerRecord struct {
	op        string
	perRecord time.Duration
}

func (c costPerRecord) BeforeBatch(_, operator, _ string, n int) {
	if operator == c.op {
		time.Sleep(time.Duration(n) * c.perRecord)
	}
}

// decisionRows is an in-memory activities.DecisionLog.
type decisionRows struct {
	mu   sync.Mutex
	rows []metrics.AutoscaleRow
}

func (l *decisionRows) Record(_ context.Context, rows []metrics.AutoscaleRow) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rows = append(l.rows, rows...)
	return nil
}

// The Done-when test of autoscaling: a keyed counter whose tasks process
// 2000 records per busy second runs at 1000 records/s on one task; the
// input doubles at second 30 and halves at second 60, and the run ends
// at 95. RunExperiment runs with the real activities on an in-process
// cluster; the Autoscale workflow, started 10 s into the run, reads the
// workers' metric rows (the in-process recorder standing in for
// ClickHouse) and sends the run's own "reconfigure" update (lazy).
//
// It must scale the counter out in one decision to the parallelism DS2
// predicts from the known cost (ceil(2000 / (2000 × 0.7)) = 2), bring the
// Kafka lag back to its level before the step, keep the output exact
// (lost 0, duplicated 0, every key's count equal to the generator's),
// scale in (2 → 1) only after the scale-down delay once the rate halved,
// and decide nothing over the constant rate after that.
func TestAutoscaleStepUpStepDownExact(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const (
		perRecord            = 500 * time.Microsecond // 2000 records per busy second
		rate                 = 1000                   // records per second before the step
		numKeys, seed        = 2000, 13
		stepAt, downAt, runs = 30, 60, 95
		jobWF                = "autoscale-inproc"
	)
	pol := autoscale.Policy{IntervalSeconds: 2, WindowSeconds: 6, StabilizationSeconds: 4, ScaleDownDelaySeconds: 10,
		TargetUtilization: 0.7, CatchUpSeconds: 20}.WithDefaults()
	predictedOut := int(math.Ceil(2 * rate / (float64(time.Second/perRecord) * pol.TargetUtilization)))
	predictedIn := int(math.Ceil(rate / (float64(time.Second/perRecord) * pol.TargetUtilization)))
	if predictedOut != 2 || predictedIn != 1 {
		t.Fatalf("test constants: DS2 predicts %d after the step and %d after the drop, want 2 and 1", predictedOut, predictedIn)
	}

	mem := metrics.NewMemory()
	c := dptest.Start(t, dptest.Options{Workers: 2, Recorder: mem, Faults: costPerRecord{"counter", perRecord}})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}
	perInterval := int64(rate * produce.RateInterval / time.Second) // per 200 ms interval
	steps := int64(time.Second / produce.RateInterval)
	in := workflows.ExperimentInput{
		Name: "autoscale", QueryName: "counter", TotalRuntimeSeconds: runs, ReconfigProtocol: workflows.ProtocolLazy,
		StateBackend: statesvc.BackendPebble, NumBuckets: 32, BatchSize: 200, Partitions: 4,
		Parallelism: map[string]int{"counter": 1},
		Producer:    workflows.ProducerSpec{Generator: produce.DefaultGenerator, RatePerSec: rate, NumKeys: numKeys, Seed: seed, ValueSize: 16, Producers: 1},
		MinWorkers:  2, KafkaBrokers: c.Brokers, DrainTimeoutSeconds: 60,
		Params: map[string]string{
			"RateLimiterConfig": fmt.Sprintf(`{"RateLimit": [%d, %d, %d], "RateChangeInterval": [%d, %d]}`,
				perInterval, 2*perInterval, perInterval, stepAt*steps, (downAt-stepAt)*steps),
			control.ParamReportSinkValues: "true",
		},
	}

	// The experiment, in its own test environment on its own goroutine.
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	jobEnv := suite.NewTestWorkflowEnvironment()
	jobEnv.SetTestTimeout(4 * time.Minute)
	jobEnv.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	jobEnv.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: jobWF})
	jobEnv.RegisterWorkflow(workflows.ReconfigureLazy)
	jobEnv.RegisterActivity(acts)
	jobs := wftest.NewEnvJobs(jobEnv)
	var res workflows.ExperimentResult
	var runErr error
	go func() {
		defer close(jobs.Done)
		jobEnv.ExecuteWorkflow(workflows.RunExperiment, in)
		if runErr = jobEnv.GetWorkflowError(); runErr == nil {
			runErr = jobEnv.GetWorkflowResult(&res)
		}
	}()
	t.Cleanup(func() {
		select {
		case <-jobs.Done:
		case <-time.After(3 * time.Minute):
			t.Error("the experiment did not end")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var started time.Time
	pollUntil(t, ctx, time.Minute, "the job runs", func() bool {
		st, err := jobs.JobState(ctx, jobWF)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status == autoscale.StatusRunning && started.IsZero() {
			started = time.Now()
		}
		return !started.IsZero() && time.Since(started) >= 10*time.Second
	})

	// The autoscaler, started on the running job like `koala autoscale`.
	scaleEnv := suite.NewTestWorkflowEnvironment()
	scaleEnv.SetTestTimeout(4 * time.Minute)
	scaleEnv.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	scaleEnv.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.AutoscalerID(jobWF)})
	log := &decisionRows{}
	scaleEnv.RegisterActivity(&activities.Autoscaler{Jobs: jobs, Metrics: mem, Decisions: log, PollInterval: 100 * time.Millisecond, MaxWait: 5 * time.Second})
	scaleEnv.ExecuteWorkflow(workflows.Autoscale, workflows.AutoscaleInput{JobWorkflowID: jobWF, Policy: pol})
	if err := scaleEnv.GetWorkflowError(); err != nil {
		t.Fatalf("autoscaler: %v", err)
	}
	var scaled workflows.AutoscaleResult
	must(t, scaleEnv.GetWorkflowResult(&scaled))
	select {
	case <-jobs.Done:
	case <-ctx.Done():
		t.Fatal("the experiment did not end")
	}
	if runErr != nil {
		t.Fatalf("experiment: %v", runErr)
	}
	t.Logf("autoscaler: %s after %d ticks, %d changes; decisions:", scaled.Ended, scaled.Ticks, scaled.Changes)
	for _, d := range scaled.Decisions {
		t.Logf("  %s", d.Line())
	}

	// Exact output: the ledger and every key's count.
	if res.Lost != 0 || res.Duplicated != 0 || res.ProduceFailed != 0 || res.Produced == 0 {
		t.Fatalf("produced %d (failed %d), lost %d, duplicated %d", res.Produced, res.ProduceFailed, res.Lost, res.Duplicated)
	}
	if res.Sink.OrderChecked && res.Reordered != 0 {
		t.Fatalf("%d records reordered", res.Reordered)
	}
	got := map[string]uint64{}
	for _, vals := range res.Sink.Values {
		for k, v := range vals {
			got[k] = max(got[k], v)
		}
	}
	oracle := map[string]uint64{}
	for n := int64(0); n < res.Produced; n++ {
		oracle[produce.KeyName(produce.UniformKeyIndex(seed, numKeys, n))]++
	}
	assertMatchesOracle(t, got, oracle, res.Produced)

	// The step and the drop, seen in the source's reads.
	src := perSecond(mem.Tasks(), res.JobID, "source", func(r metrics.TaskRow) float64 { return float64(r.RecordsIn) })
	lag := perSecond(mem.Tasks(), res.JobID, "source", func(r metrics.TaskRow) float64 { return float64(r.KafkaLag) })
	sink := perSecond(mem.Tasks(), res.JobID, "sink", func(r metrics.TaskRow) float64 { return float64(r.RecordsIn) })
	first := src[0].at
	step := firstSecond(t, src, first.Add(20*time.Second), func(v float64) bool { return v >= 1.4*rate }, "the step up")
	down := firstSecond(t, src, step.Add(20*time.Second), func(v float64) bool { return v <= 1.25*rate }, "the step down")
	t.Logf("step up at +%.0fs, down at +%.0fs of the source's first row", step.Sub(first).Seconds(), down.Sub(first).Seconds())

	// One scale-out after the step, to DS2's prediction; one scale-in,
	// after the scale-down delay, once the rate dropped; nothing else.
	type change struct {
		d autoscale.Decision
		c autoscale.Change
	}
	var changes []change
	var holds []autoscale.Decision
	for _, d := range scaled.Decisions {
		for _, c := range d.Changes {
			changes = append(changes, change{d, c})
		}
		if len(d.Holds) > 0 {
			holds = append(holds, d)
		}
	}
	if len(changes) != 2 {
		t.Fatalf("%d changes, want a scale-out and a scale-in: %v", len(changes), changes)
	}
	out, inn := changes[0], changes[1]
	if out.c.From != 1 || out.c.To != predictedOut || out.c.Outcome != autoscale.OutcomeDone || out.d.At.Before(step) || !out.d.At.Before(down) {
		t.Fatalf("first change %s at +%.0fs: want counter 1→%d, done, between the step and the drop", out.d.Line(), out.d.At.Sub(first).Seconds(), predictedOut)
	}
	e, _ := out.d.Estimate("counter")
	if nominal := float64(time.Second / perRecord); e.TrueRate < 0.6*nominal || e.TrueRate > 1.1*nominal {
		t.Fatalf("measured true rate %.0f/s/task, want about %.0f (the injected cost)", e.TrueRate, nominal)
	}
	if inn.c.From != predictedOut || inn.c.To != predictedIn || inn.c.Outcome != autoscale.OutcomeDone ||
		inn.d.At.Sub(down).Seconds() < pol.ScaleDownDelaySeconds {
		t.Fatalf("second change %s at +%.0fs: want counter %d→%d at least %gs after the drop at +%.0fs",
			inn.d.Line(), inn.d.At.Sub(first).Seconds(), predictedOut, predictedIn, pol.ScaleDownDelaySeconds, down.Sub(first).Seconds())
	}
	heldFirst := false
	for _, h := range holds {
		if h.At.Before(inn.d.At) && !h.At.Before(down) && strings.Contains(h.Holds[0].Reason, "scale-down delay") {
			heldFirst = true
		}
		if h.At.After(inn.c.Ended) {
			t.Fatalf("a decision over the constant rate after the scale-in: %s", h.Line())
		}
	}
	if !heldFirst {
		t.Fatalf("the scale-in was not held for the scale-down delay first; holds: %v", holds)
	}
	if p := parallelismOf(res.Final, "counter"); p != predictedIn {
		t.Fatalf("counter ends with %d tasks, want %d", p, predictedIn)
	}
	if end := first.Add(runs * time.Second); end.Sub(inn.c.Ended) < 10*time.Second {
		t.Fatalf("the constant stretch after the scale-in is only %.0fs long", end.Sub(inn.c.Ended).Seconds())
	}

	// The lag is back at its level before the step, before the drop. The
	// lag counts what the source read ahead and the tasks have in flight,
	// which at twice the rate is twice as many records even with no
	// backlog at all; so the level is judged in seconds of the source's
	// input (lag ÷ records read that second), the delay a record meets.
	// The lag in records is logged beside it.
	ep := autoscale.Episode(points(lag, first), points(sink, first), 10, step.Sub(first).Seconds(), down.Sub(first).Seconds())
	t.Logf("lag in records: %.0f before the step, peak %.0f at +%.0fs, back at the baseline %.0fs after the step (recovered %v); sink min/pre %.2f",
		ep.BaselineLag, ep.PeakLag, ep.PeakSec, ep.RecoveredSec, ep.Recovered, ep.MinOverPre())
	epSec := autoscale.Episode(points(lagSeconds(lag, src), first), points(sink, first), 10, step.Sub(first).Seconds(), down.Sub(first).Seconds())
	t.Logf("lag in seconds of input: %.2f s before the step, peak %.2f s at +%.0fs, back at the baseline %.0fs after the step (recovered %v)",
		epSec.BaselineLag, epSec.PeakLag, epSec.PeakSec, epSec.RecoveredSec, epSec.Recovered)
	if !epSec.Recovered {
		t.Fatalf("the Kafka lag was not back at its pre-step level of %.2f s of input before the rate dropped (peak %.2f s)", epSec.BaselineLag, epSec.PeakLag)
	}

	// Every decision is in the decision log, one row per operator.
	log.mu.Lock()
	defer log.mu.Unlock()
	var outRow *metrics.AutoscaleRow
	for i, r := range log.rows {
		if r.Operator == "counter" && r.Action == autoscale.ActionScaleOut {
			outRow = &log.rows[i]
		}
	}
	if len(log.rows) != 3*len(scaled.Decisions) || outRow == nil || outRow.To != uint64(predictedOut) || !strings.HasPrefix(outRow.Outcome, "done") {
		t.Fatalf("decision log: %d rows for %d decisions (want 3 each), scale-out row %+v", len(log.rows), len(scaled.Decisions), outRow)
	}
}

// pollUntil polls cond every 100 ms until it holds or limit passes.
func pollUntil(t *testing.T, ctx context.Context, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out after %s", what, limit)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// second is one second's sum of a column over an operator's tasks.
type second struct {
	at time.Time
	v  float64
}

// perSecond sums col over op's rows of job per second, in time order.
func perSecond(rows []metrics.TaskRow, job, op string, col func(metrics.TaskRow) float64) []second {
	sums := map[int64]float64{}
	for _, r := range rows {
		if r.Job == job && r.Operator == op {
			sums[r.Time.Unix()] += col(r)
		}
	}
	out := make([]second, 0, len(sums))
	for s, v := range sums {
		out = append(out, second{time.Unix(s, 0), v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func firstSecond(t *testing.T, s []second, from time.Time, ok func(float64) bool, what string) time.Time {
	t.Helper()
	for _, p := range s {
		if !p.at.Before(from) && ok(p.v) {
			return p.at
		}
	}
	t.Fatalf("no second after %s shows %s", from.Format(time.TimeOnly), what)
	return time.Time{}
}

// lagSeconds is each second's lag over the records the source read that
// second (seconds without reads are left out).
func lagSeconds(lag, rate []second) []second {
	per := map[time.Time]float64{}
	for _, r := range rate {
		per[r.at] = r.v
	}
	var out []second
	for _, l := range lag {
		if r := per[l.at]; r > 0 {
			out = append(out, second{l.at, l.v / r})
		}
	}
	return out
}

func points(s []second, zero time.Time) []metrics.Point {
	out := make([]metrics.Point, len(s))
	for i, p := range s {
		out[i] = metrics.Point{Sec: p.at.Sub(zero).Seconds(), Value: p.v}
	}
	return out
}

func parallelismOf(dep control.Deployment, op string) int {
	spec, _ := dep.Job.Operator(op)
	return spec.Parallelism
}
