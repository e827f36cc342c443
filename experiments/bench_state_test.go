package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
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

func TestParseStateSpec(t *testing.T) {
	want := StateSpec{Sizes: []uint64{500e6, 1e9}, ActiveKeys: 20000, ValueBytes: 4096, Out: "/tmp/x:y.json"}
	got, err := ParseStateSpec(FormatStateSpec(want))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: %+v %v, want %+v", got, err, want)
	}
	if w := want.WarmKeys(1e9); w != 243665 { // ⌈10⁹ / 4104⌉
		t.Errorf("warm keys of 1 GB at 4096-byte values: %d", w)
	}
	for _, tc := range []struct{ spec, wantErr string }{
		{"", "want <state bytes>"},
		{"1000000:10:/o", "want <state bytes>"},
		{"x:10:8:/o", "state sizes"},
		{"1000000:0:8:/o", "active keys 0"},
		{"1000000:x:8:/o", "active keys \"x\""},
		{"1000000:10:7:/o", "state value bytes 7: want 8 to 1048584"},
		{"1000000:10:1048585:/o", "state value bytes 1048585"},
		{"1000000:10:-3:/o", "state value bytes -3"},
		{"1000:100:8:/o", "fewer than the 100 active keys"},
		{"100GB:10:8:/o", "at most 64.00 GB"},
		{"1000000,-5:10:8:/o", `size "-5"`},
		{"1000000:10:8:", "output path"},
	} {
		_, err := ParseStateSpec(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseStateSpec(%q): %v, want an error containing %q", tc.spec, err, tc.wantErr)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{{"4096", 4096}, {"512MB", 512e6}, {"0.5GB", 500e6}, {" 4 gb ", 4e9}, {"2KB", 2000}, {"10B", 10}} {
		if got, err := ParseByteSize(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "GB", "-1GB", "0", "0.1", "1TB", "abc", "NaN"} {
		if _, err := ParseByteSize(bad); err == nil || !strings.Contains(err.Error(), "unit B, KB, MB or GB") {
			t.Errorf("ParseByteSize(%q): %v, want an error naming the units", bad, err)
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
	env := os.Getenv(EnvBenchState)
	if env == "" {
		t.Skip("run by koala bench --phases state (" + EnvBenchState + " unset)")
	}
	spec, err := ParseStateSpec(env)
	if err != nil {
		t.Fatal(err)
	}
	var res StateScaling
	for _, size := range spec.Sizes {
		var p StatePoint
		t.Run(fmt.Sprintf("state=%d", size), func(t *testing.T) {
			p = stateScalingPoint(t, spec, size)
		})
		if p.Error == "" && t.Failed() {
			p.Error = "subtest failed (see test log)"
		}
		res.Points = append(res.Points, p)
		t.Logf("state %d B (%d warm keys × %d + %d B) active %d: total state %d B, on disk %d B, moved %d B, active moved %d B, migrated %d B, build %.1f s, reconfig %.1f s, active %.1f s",
			p.TargetStateBytes, p.WarmKeys, StateKeyBytes, p.ValueBytes, p.ActiveKeys, p.TotalStateBytes, p.DiskBytes, p.MovedStateBytes, p.ActiveMovedBytes, p.BytesMigrated, p.BuildSec, p.ReconfigSec, p.ActivePhaseSec)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec.Out, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func stateScalingPoint(t *testing.T, spec StateSpec, size uint64) StatePoint {
	const seed = 11
	warmKeys, activeKeys := spec.WarmKeys(size), spec.ActiveKeys
	activeEvents := int64(5 * activeKeys) // touches ~99 % of the active keys
	p := StatePoint{TargetStateBytes: size, WarmKeys: warmKeys, ActiveKeys: activeKeys, ValueBytes: spec.ValueBytes}
	c := dptest.Start(t, dptest.Options{Workers: 3})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 60 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
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
		JobID: fmt.Sprintf("bench-state-%d", size), Query: "counter", Parallelism: map[string]int{"counter": 2},
		NumBuckets: 128, BatchSize: 2000, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand, queries.ParamCounterPad: strconv.Itoa(spec.ValueBytes - 8)},
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

func stateReconfigure(acts *activities.Activities, dep control.Deployment, workers []control.WorkerInfo, id string, par int) (control.Deployment, error) {
	var s testsuite.WorkflowTestSuite
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
