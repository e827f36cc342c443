package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/inproc"
	"koala/dataplane/produce"
	"koala/experiments/runner"
	"koala/statesvc"
	"koala/workflows"
	"koala/workflows/plan"
)

// MeasureStateScaling is the state phase: every size of spec on a fresh
// in-process cluster (inproc), one after another. The workers' and the
// reconfiguration workflow's logs go to log.
func MeasureStateScaling(ctx context.Context, spec StateSpec, log *slog.Logger) StateScaling {
	var res StateScaling
	for _, size := range spec.Sizes {
		if ctx.Err() != nil {
			break
		}
		p := measureStatePoint(ctx, spec, size, log)
		res.Points = append(res.Points, p)
		log.Info(fmt.Sprintf("state %d B (%d warm keys × %d + %d B) active %d: total state %d B, on disk %d B, moved %d B, active moved %d B, migrated %d B, build %.1f s, reconfig %.1f s, active %.1f s",
			p.TargetStateBytes, p.WarmKeys, StateKeyBytes, p.ValueBytes, p.ActiveKeys, p.TotalStateBytes, p.DiskBytes, p.MovedStateBytes, p.ActiveMovedBytes, p.BytesMigrated, p.BuildSec, p.ReconfigSec, p.ActivePhaseSec))
	}
	return res
}

// measureStatePoint warms a fresh three-worker cluster with size bytes of
// counter state, scales the counter out 2→4 lazily and feeds the active
// keys; what went wrong is the point's Error, so one bad size does not lose
// the others.
func measureStatePoint(ctx context.Context, spec StateSpec, size uint64, log *slog.Logger) StatePoint {
	const seed = 11
	warmKeys, activeKeys := spec.WarmKeys(size), spec.ActiveKeys
	activeEvents := int64(5 * activeKeys) // touches ~99 % of the active keys
	p := StatePoint{TargetStateBytes: size, WarmKeys: warmKeys, ActiveKeys: activeKeys, ValueBytes: spec.ValueBytes}
	fail := func(what string, err error) StatePoint {
		p.Error = what + ": " + err.Error()
		log.Error("state point failed", "size", size, "error", p.Error)
		return p
	}
	c, err := inproc.Start(inproc.Options{Workers: 3, Logger: log})
	if err != nil {
		return fail("in-process cluster", err)
	}
	defer func() {
		if err := c.Close(); err != nil && p.Error == "" {
			p.Error = "stop the in-process cluster: " + err.Error()
		}
	}()
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 60 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()

	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	if err != nil {
		return fail("discover workers", err)
	}
	job, err := acts.BuildJob(ctx, activities.JobInput{
		JobID: fmt.Sprintf("bench-state-%d", size), Query: "counter", Parallelism: map[string]int{"counter": 2},
		NumBuckets: 128, BatchSize: 2000, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand, control.ParamDummyFieldSize: strconv.Itoa(spec.ValueBytes - 8)},
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
	warm := phase(produce.SequentialGenerator, warmKeys, int64(warmKeys))
	if err := acts.StartProducer(ctx, warm); err != nil {
		return fail("start warm-up producer", err)
	}
	if err := stateWaitSink(ctx, acts, dep, uint64(warmKeys), 20*time.Minute); err != nil {
		return fail("warm-up", err)
	}
	p.BuildSec = time.Since(t0).Seconds()
	if p.DiskBytes, err = dirBytes(c.DataDirs); err != nil {
		return fail("state on disk", err)
	}
	if _, err := acts.StopProducer(ctx, warm); err != nil {
		return fail("stop warm-up producer", err)
	}

	t0 = time.Now()
	dep, err = stateReconfigure(acts, dep, workers, job.JobID+"-r1", 4, log)
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
	act := phase(produce.DefaultGenerator, activeKeys, activeEvents)
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
		touched[produce.UniformKeyIndex(seed, activeKeys, n)] = true
	}
	for i := range warmKeys {
		key := produce.KeyName(i)
		sz := uint64(len(key) + spec.ValueBytes)
		p.TotalStateBytes += sz
		if !moved[statesvc.BucketOf([]byte(key), job.NumBuckets)] {
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
		p.KeysFetched += st.KeysFetched
	}
	// Every fetched entry is a key and its whole value: the values the
	// counter stored have the configured size.
	if want := p.KeysFetched * uint64(StateKeyBytes+spec.ValueBytes); p.KeysFetched == 0 || p.BytesMigrated != want {
		return fail("migrated entries", fmt.Errorf("%d keys fetched, %d bytes migrated; want %d (key %d + value %d bytes each)", p.KeysFetched, p.BytesMigrated, want, StateKeyBytes, spec.ValueBytes))
	}
	return p
}

// dirBytes sums the sizes of the regular files under dirs.
func dirBytes(dirs []string) (uint64, error) {
	var n uint64
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // a file Pebble removed meanwhile
				}
				return err
			}
			if !e.Type().IsRegular() {
				return nil
			}
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			n += uint64(info.Size())
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("size of %s: %w", d, err)
		}
	}
	return n, nil
}

// stateReconfigure runs the lazy scale-out workflow in Temporal's in-memory
// test environment: the in-process cluster has no Temporal server, and the
// workflow's activities still act on the real workers over NATS.
func stateReconfigure(acts *activities.Activities, dep control.Deployment, workers []control.WorkerInfo, id string, par int, log *slog.Logger) (control.Deployment, error) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(tlog.NewStructuredLogger(log))
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(5 * time.Minute)
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivity(acts)
	env.ExecuteWorkflow(workflows.ReconfigureLazy, workflows.ReconfigureInput{
		ReconfigID: id, Current: dep, Workers: workers,
		Spec: workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: par},
	})
	if !env.IsWorkflowCompleted() {
		return dep, fmt.Errorf("reconfiguration %s did not complete", id)
	}
	if err := env.GetWorkflowError(); err != nil {
		return dep, fmt.Errorf("reconfiguration %s: %w", id, err)
	}
	var res workflows.ReconfigureResult
	if err := env.GetWorkflowResult(&res); err != nil {
		return dep, fmt.Errorf("result of reconfiguration %s: %w", id, err)
	}
	return res.Deployment, nil
}

// stateStatus asks the task's worker for its status over NATS.
func stateStatus(ctx context.Context, acts *activities.Activities, dep control.Deployment, task control.TaskRef) (control.TaskStatus, error) {
	st, err := runner.WorkerStatus(ctx, acts.NC, dep.Job.JobID, task.WorkerID, []string{task.ID})
	if err != nil {
		return control.TaskStatus{}, fmt.Errorf("status of %s: %w", task.ID, err)
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
