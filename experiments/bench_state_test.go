package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/workflows"
	"koala/workflows/plan"
)

func TestParseStateSpec(t *testing.T) {
	w, a, out, err := ParseStateSpec(FormatStateSpec([]int{250000, 500000}, 50000, "/tmp/x.json"))
	if err != nil || len(w) != 2 || w[1] != 500000 || a != 50000 || out != "/tmp/x.json" {
		t.Errorf("good spec: %v %d %q %v", w, a, out, err)
	}
	for _, bad := range []string{"", "1000:10", "x:10:/o", "1000:0:/o", "100:1000:/o", "1000,-5:10:/o"} {
		if _, _, _, err := ParseStateSpec(bad); err == nil {
			t.Errorf("ParseStateSpec(%q): no error", bad)
		}
	}
}

func TestStateScalingVerdict(t *testing.T) {
	pts := func(bs ...uint64) StateScaling {
		var s StateScaling
		for _, b := range bs {
			s.Points = append(s.Points, StatePoint{BytesMigrated: b})
		}
		return s
	}
	if v := pts(1000, 1100, 1190).Verdict(); v != VerdictMet {
		t.Errorf("within 19 %%: %s", v)
	}
	if v := pts(1000, 2000).Verdict(); v != VerdictMissed {
		t.Errorf("doubled: %s", v)
	}
	if v := pts(1000).Verdict(); v != VerdictUnknown {
		t.Errorf("one point: %s", v)
	}
	s := pts(1000, 5000)
	s.Points[1].Error = "failed"
	if v := s.Verdict(); v != VerdictUnknown {
		t.Errorf("failed point counted: %s", v)
	}
}

// TestBenchStateScaling is the state phase of koala bench (see
// bench_state.go); without EnvBenchState it is skipped.
func TestBenchStateScaling(t *testing.T) {
	spec := os.Getenv(EnvBenchState)
	if spec == "" {
		t.Skip("run by koala bench --phases state (" + EnvBenchState + " unset)")
	}
	warm, active, out, err := ParseStateSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	var res StateScaling
	for _, w := range warm {
		var p StatePoint
		t.Run(fmt.Sprintf("warm=%d", w), func(t *testing.T) {
			p = stateScalingPoint(t, w, active)
		})
		if p.Error == "" && t.Failed() {
			p.Error = "subtest failed (see test log)"
		}
		res.Points = append(res.Points, p)
		t.Logf("warm %d active %d: total state %d B, moved %d B, active moved %d B, migrated %d B, build %.1f s, reconfig %.1f s, active %.1f s",
			p.WarmKeys, p.ActiveKeys, p.TotalStateBytes, p.MovedStateBytes, p.ActiveMovedBytes, p.BytesMigrated, p.BuildSec, p.ReconfigSec, p.ActivePhaseSec)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func stateScalingPoint(t *testing.T, warmKeys, activeKeys int) StatePoint {
	const seed, valueBytes = 11, 8        // the counter's state value is 8 bytes
	activeEvents := int64(5 * activeKeys) // touches ~99 % of the active keys
	p := StatePoint{WarmKeys: warmKeys, ActiveKeys: activeKeys}
	c := dptest.Start(t, dptest.Options{Workers: 3})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 60 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	fail := func(what string, err error) StatePoint {
		p.Error = what + ": " + err.Error()
		t.Error(p.Error)
		return p
	}

	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	if err != nil {
		return fail("discover workers", err)
	}
	job, err := acts.BuildJob(ctx, activities.JobInput{
		JobID: fmt.Sprintf("bench-state-%d", warmKeys), Query: "counter", Parallelism: map[string]int{"counter": 2},
		NumBuckets: 128, BatchSize: 2000, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: "pebble",
		Params: map[string]string{dataplane.ParamMigrationMode: dataplane.ModeFetchOnDemand},
	})
	if err != nil {
		return fail("build job", err)
	}
	dep, err := plan.Initial(job, workers)
	if err != nil {
		return fail("plan", err)
	}
	if err := acts.CreateTopic(ctx, job); err != nil {
		return fail("create topic", err)
	}
	if err := acts.DeployTasks(ctx, activities.TasksInput{Deployment: dep}); err != nil {
		return fail("deploy", err)
	}
	if err := acts.StartTasks(ctx, activities.TasksInput{Deployment: dep}); err != nil {
		return fail("start", err)
	}
	phase := func(gen string, keys int, events int64) activities.ProducerInput {
		return activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
			Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, Generator: gen, NumKeys: keys, Seed: seed, MaxEvents: events,
		}}
	}

	t0 := time.Now()
	warm := phase(dataplane.SequentialGenerator, warmKeys, int64(warmKeys))
	if err := acts.StartProducer(ctx, warm); err != nil {
		return fail("start warm-up producer", err)
	}
	if err := stateWaitSink(ctx, acts, dep, uint64(warmKeys), 10*time.Minute); err != nil {
		return fail("warm-up", err)
	}
	p.BuildSec = time.Since(t0).Seconds()
	if _, err := acts.StopProducer(ctx, warm); err != nil {
		return fail("stop warm-up producer", err)
	}

	t0 = time.Now()
	dep, err = stateReconfigure(acts, dep, workers, job.JobID+"-r1", 4)
	if err != nil {
		return fail("reconfigure", err)
	}
	p.ReconfigSec = time.Since(t0).Seconds()
	sts, err := stateCounterStatus(ctx, acts, dep)
	if err != nil {
		return fail("status", err)
	}
	for _, st := range sts {
		p.KLTEntries += st.KLTSize
	}

	t0 = time.Now()
	act := phase(dataplane.DefaultGenerator, activeKeys, activeEvents)
	if err := acts.StartProducer(ctx, act); err != nil {
		return fail("start active producer", err)
	}
	if err := stateWaitSink(ctx, acts, dep, uint64(warmKeys)+uint64(activeEvents), 10*time.Minute); err != nil {
		return fail("active phase", err)
	}
	p.ActivePhaseSec = time.Since(t0).Seconds()

	// Oracle, from the generators' definitions.
	table, _ := dep.Table("counter")
	moved := map[int]bool{}
	for b, idx := range table.Buckets {
		if idx >= 2 {
			moved[b] = true
		}
	}
	touched := make([]bool, activeKeys)
	for n := int64(0); n < activeEvents; n++ {
		touched[dataplane.UniformKeyIndex(seed, activeKeys, n)] = true
	}
	for i := range warmKeys {
		key := dataplane.KeyName(i)
		sz := uint64(len(key) + valueBytes)
		p.TotalStateBytes += sz
		if !moved[dataplane.BucketOf([]byte(key), job.NumBuckets)] {
			continue
		}
		p.MovedStateBytes += sz
		if i < activeKeys && touched[i] {
			p.ActiveMovedBytes += sz
		}
	}
	if sts, err = stateCounterStatus(ctx, acts, dep); err != nil {
		return fail("status", err)
	}
	for _, st := range sts {
		p.BytesMigrated += st.BytesMoved
	}
	return p
}

func stateReconfigure(acts *activities.Activities, dep control.Deployment, workers []control.WorkerInfo, id string, par int) (control.Deployment, error) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(5 * time.Minute)
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivity(acts)
	env.ExecuteWorkflow(workflows.ReconfigureLazy, workflows.ReconfigureInput{
		ReconfigID: id, Current: dep, Workers: workers,
		Spec: workflows.ReconfigSpec{Type: workflows.KindScaleUp, TargetOperator: "counter", TargetParallelism: par},
	})
	if !env.IsWorkflowCompleted() {
		return dep, fmt.Errorf("reconfiguration %s did not complete", id)
	}
	if err := env.GetWorkflowError(); err != nil {
		return dep, fmt.Errorf("reconfiguration %s: %w", id, err)
	}
	var res workflows.ReconfigureResult
	if err := env.GetWorkflowResult(&res); err != nil {
		return dep, err
	}
	return res.Deployment, nil
}

func stateStatus(ctx context.Context, acts *activities.Activities, dep control.Deployment, task control.TaskRef) (control.TaskStatus, error) {
	data, err := control.NewEnvelope(dep.Job.JobID, "", control.TasksRequest{TaskIDs: []string{task.ID}})
	if err != nil {
		return control.TaskStatus{}, err
	}
	msg, err := acts.NC.RequestWithContext(ctx, control.WorkerSubject(task.WorkerID, control.VerbStatus), data)
	if err != nil {
		return control.TaskStatus{}, err
	}
	var r control.Reply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		return control.TaskStatus{}, err
	}
	if r.Error != "" {
		return control.TaskStatus{}, errors.New(r.Error)
	}
	var st control.StatusReply
	if err := json.Unmarshal(r.Body, &st); err != nil {
		return control.TaskStatus{}, err
	}
	if len(st.Tasks) != 1 {
		return control.TaskStatus{}, fmt.Errorf("status of %s: %d tasks", task.ID, len(st.Tasks))
	}
	return st.Tasks[0], nil
}

func stateCounterStatus(ctx context.Context, acts *activities.Activities, dep control.Deployment) ([]control.TaskStatus, error) {
	var out []control.TaskStatus
	for _, task := range dep.TasksOf("counter") {
		st, err := stateStatus(ctx, acts, dep, task)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// stateWaitSink polls the sink until it received n records.
func stateWaitSink(ctx context.Context, acts *activities.Activities, dep control.Deployment, n uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	sink := dep.TasksOf("sink")[0]
	for {
		st, err := stateStatus(ctx, acts, dep, sink)
		if err != nil {
			return err
		}
		if st.Error != "" {
			return fmt.Errorf("sink failed: %s", st.Error)
		}
		if st.SinkReceived >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sink received %d records, want ≥ %d within %s", st.SinkReceived, n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
