// Package wftest runs a registered query end to end for tests: an
// in-process data plane (embedded NATS, kfake Kafka, workers), the job
// deployed with the real activities, input produced to Kafka with the
// records' event times as Kafka timestamps, the input finished and drained,
// and the record sinks' output returned.
package wftest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/metrics"
	"koala/workflows"
	"koala/workflows/plan"
)

// Options describe one run.
type Options struct {
	Query       string
	JobID       string // default: query name + test name
	Parallelism map[string]int
	Params      map[string]string
	Partitions  int    // default 4
	NumBuckets  int    // default 32
	BatchSize   int    // default 100
	Workers     int    // default 2
	Backend     string // default "memory"
	// Phases are produced in order. The first is produced before the tasks
	// start, so the sources see it all at once (deterministic watermarks).
	Phases []Phase
	// ManualPartitions sends each record to Record.Partition instead of
	// partitioning by key.
	ManualPartitions bool
	Timeout          time.Duration // default 2 minutes
	// Recorder receives the workers' metric rows (default: discarded).
	Recorder metrics.Recorder
	// Faults are injected into the workers' tasks (nil: none).
	Faults dataplane.Faults
}

// Phase is a slice of input and what to wait for after producing it.
type Phase struct {
	Records []dataplane.Record
	// Until, when set, is polled after the phase was produced until it
	// returns true (e.g. a window fired, so later records are surely late).
	Until func(r *Run) bool
	// Then, when set, runs after Until (e.g. a reconfiguration).
	Then func(r *Run)
}

// Run is a running job.
type Run struct {
	T       testing.TB
	Ctx     context.Context
	Cluster *dptest.Cluster
	Acts    *activities.Activities
	Workers []control.WorkerInfo
	Job     control.JobSpec
	Dep     control.Deployment
	client  *kgo.Client
	opts    Options
}

// Result is what a finished run produced.
type Result struct {
	Output   []dataplane.Record
	Counters map[string]map[string]uint64 // task → counter → value
	Sink     activities.SinkCounts
}

// Counter sums one counter over every task whose id starts with prefix.
func (r Result) Counter(prefix, name string) uint64 {
	var n uint64
	for task, cs := range r.Counters {
		if strings.HasPrefix(task, prefix) {
			n += cs[name]
		}
	}
	return n
}

// Start deploys the job and produces nothing yet.
func Start(t testing.TB, o Options) *Run {
	t.Helper()
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	if o.NumBuckets == 0 {
		o.NumBuckets = 32
	}
	if o.BatchSize == 0 {
		o.BatchSize = 100
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.Backend == "" {
		o.Backend = "memory"
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.JobID == "" {
		o.JobID = strings.NewReplacer("/", "-", " ", "-").Replace(o.Query + "-" + t.Name())
	}
	c := dptest.Start(t, dptest.Options{Workers: o.Workers, Recorder: o.Recorder, Faults: o.Faults})
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	t.Cleanup(cancel)
	t.Cleanup(func() { dataplane.ForgetCollected(o.JobID) })
	r := &Run{T: t, Ctx: ctx, Cluster: c, Acts: &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}, opts: o}
	ws, err := r.Acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: o.Workers, Timeout: 10})
	r.must(err)
	r.Workers = ws
	job, err := r.Acts.BuildJob(ctx, activities.JobInput{
		JobID: o.JobID, Query: o.Query, Parallelism: o.Parallelism, NumBuckets: o.NumBuckets, BatchSize: o.BatchSize,
		Partitions: o.Partitions, KafkaBrokers: c.Brokers, StateBackend: o.Backend, Params: o.Params,
	})
	r.must(err)
	r.Job = job
	dep, err := plan.Initial(job, ws)
	r.must(err)
	r.Dep = dep
	r.must(r.Acts.CreateTopic(ctx, job))
	r.must(r.Acts.DeployTasks(ctx, activities.TasksInput{Deployment: dep}))
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.DefaultProduceTopic(job.Topic)}
	if o.ManualPartitions {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	r.must(err)
	t.Cleanup(cl.Close)
	r.client = cl
	return r
}

// RunQuery starts the job, runs its phases, finishes the input and
// returns the output.
func RunQuery(t testing.TB, o Options) Result {
	t.Helper()
	return Start(t, o).Run()
}

// Run produces every phase (starting the tasks after the first), finishes
// the input and returns the output.
func (r *Run) Run() Result {
	r.T.Helper()
	for i, ph := range r.opts.Phases {
		r.Produce(ph.Records)
		if i == 0 {
			r.must(r.Acts.StartTasks(r.Ctx, activities.TasksInput{Deployment: r.Dep}))
		}
		if ph.Until != nil {
			r.WaitFor(fmt.Sprintf("phase %d", i), func() bool { return ph.Until(r) })
		}
		if ph.Then != nil {
			ph.Then(r)
		}
	}
	if len(r.opts.Phases) == 0 {
		r.must(r.Acts.StartTasks(r.Ctx, activities.TasksInput{Deployment: r.Dep}))
	}
	return r.Finish()
}

// Produce writes records in order (synchronously).
func (r *Run) Produce(recs []dataplane.Record) {
	r.T.Helper()
	const chunk = 2000
	for start := 0; start < len(recs); start += chunk {
		end := min(start+chunk, len(recs))
		batch := make([]*kgo.Record, 0, end-start)
		for _, rec := range recs[start:end] {
			kr := &kgo.Record{Key: rec.Key, Value: rec.Value, Timestamp: time.Unix(0, rec.EventTime)}
			if r.opts.ManualPartitions {
				kr.Partition = rec.Partition
			}
			batch = append(batch, kr)
		}
		r.must(r.client.ProduceSync(r.Ctx, batch...).FirstErr())
	}
}

// Output is what the record sinks received so far.
func (r *Run) Output() []dataplane.Record { return dataplane.CollectedRecords(r.Job.JobID) }

// Counters merges the operator counters of every worker.
func (r *Run) Counters() map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, w := range r.Cluster.Workers {
		for task, cs := range w.OperatorCounters(r.Job.JobID) {
			out[task] = cs
		}
	}
	return out
}

// Watermarks merges the task watermarks of every worker.
func (r *Run) Watermarks() map[string]int64 {
	out := map[string]int64{}
	for _, w := range r.Cluster.Workers {
		for task, wm := range w.Watermarks(r.Job.JobID) {
			out[task] = wm
		}
	}
	return out
}

// WaitFor polls cond until it holds, failing on task errors or timeout.
func (r *Run) WaitFor(what string, cond func() bool) {
	r.T.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if err := r.TaskErrors(); err != nil {
			r.T.Fatalf("waiting for %s: %v", what, err)
		}
		if time.Now().After(deadline) {
			r.T.Fatalf("waiting for %s: timed out (watermarks %v)", what, r.Watermarks())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TaskErrors reports failed tasks of the job.
func (r *Run) TaskErrors() error {
	var errs []error
	for _, wid := range r.Dep.Workers() {
		data, err := control.NewEnvelope(r.Job.JobID, "", control.TasksRequest{})
		if err != nil {
			return err
		}
		msg, err := r.Acts.NC.RequestWithContext(r.Ctx, control.WorkerSubject(wid, control.VerbStatus), data)
		if err != nil {
			return fmt.Errorf("status of worker %s: %w", wid, err)
		}
		var rep control.Reply
		if err := json.Unmarshal(msg.Data, &rep); err != nil {
			return err
		}
		var st control.StatusReply
		if err := json.Unmarshal(rep.Body, &st); err != nil {
			return err
		}
		for _, ts := range st.Tasks {
			if ts.Error != "" {
				errs = append(errs, fmt.Errorf("task %s: %s", ts.TaskID, ts.Error))
			}
		}
	}
	return errors.Join(errs...)
}

// Rescale changes the parallelism of op with the lazy protocol
// (workflows.ReconfigureLazy) or another reconfiguration workflow.
func (r *Run) Rescale(protocol any, op string, parallelism int) {
	r.T.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetTestTimeout(2 * time.Minute)
	// Activities run inside the workflow goroutine in the test environment;
	// on a loaded machine (-race) they can exceed the 1 s deadlock detector.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterActivity(r.Acts)
	typ := plan.KindScaleUp
	if parallelism < len(r.Dep.TasksOf(op)) {
		typ = plan.KindScaleDown
	}
	env.ExecuteWorkflow(protocol, workflows.ReconfigureInput{
		ReconfigID: fmt.Sprintf("%s-r%d", r.Job.JobID, r.Dep.Epoch+1), Current: r.Dep, Workers: r.Workers,
		Spec: workflows.ReconfigSpec{Type: typ, TargetOperator: op, TargetParallelism: parallelism},
	})
	if !env.IsWorkflowCompleted() {
		r.T.Fatalf("rescale of %s to %d did not complete", op, parallelism)
	}
	if err := env.GetWorkflowError(); err != nil {
		r.T.Fatalf("rescale of %s to %d: %v", op, parallelism, err)
	}
	var res workflows.ReconfigureResult
	r.must(env.GetWorkflowResult(&res))
	r.Dep = res.Deployment
}

// Finish ends the input at the current end offsets, drains the job and
// returns what it produced.
func (r *Run) Finish() Result {
	r.T.Helper()
	ends, err := r.Acts.EndOffsets(r.Ctx, r.Job)
	r.must(err)
	if _, err := r.Acts.FinishAndDrain(r.Ctx, activities.DrainInput{Deployment: r.Dep, BarrierID: r.Job.JobID + "-eos", EndOffsets: ends, TimeoutSecs: 60}); err != nil {
		if terr := r.TaskErrors(); terr != nil {
			r.T.Fatalf("drain: %v; %v", err, terr)
		}
		r.T.Fatalf("drain: %v", err)
	}
	r.must(r.TaskErrors())
	sink, err := r.Acts.CollectSinkCounts(r.Ctx, r.Dep)
	r.must(err)
	return Result{Output: r.Output(), Counters: r.Counters(), Sink: sink}
}

func (r *Run) must(err error) {
	r.T.Helper()
	if err != nil {
		r.T.Fatal(err)
	}
}

// Lines renders records as sorted "key=value" lines (values as strings),
// for comparing outputs regardless of order.
func Lines(recs []dataplane.Record, value func(dataplane.Record) string) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		v := string(r.Value)
		if value != nil {
			v = value(r)
		}
		out = append(out, string(r.Key)+"="+v)
	}
	sort.Strings(out)
	return out
}

// Diff describes how got differs from want (both sorted), or "".
func Diff(got, want []string) string {
	g, w := map[string]int{}, map[string]int{}
	for _, s := range got {
		g[s]++
	}
	for _, s := range want {
		w[s]++
	}
	var b strings.Builder
	n := 0
	for _, s := range want {
		if g[s] < w[s] && n < 10 {
			fmt.Fprintf(&b, "  missing: %s\n", s)
			n++
			g[s]++
		}
	}
	g = map[string]int{}
	for _, s := range got {
		g[s]++
	}
	for _, s := range got {
		if g[s] > w[s] && n < 20 {
			fmt.Fprintf(&b, "  unexpected: %s\n", s)
			n++
			w[s]++
		}
	}
	if b.Len() == 0 && len(got) == len(want) {
		return ""
	}
	return fmt.Sprintf("got %d records, want %d\n%s", len(got), len(want), b.String())
}

// SinkValues merges the KeyValues of every collect-sink task (the largest
// little-endian uint64 value seen per key).
func (r *Run) SinkValues() map[string]uint64 {
	r.T.Helper()
	out := map[string]uint64{}
	for _, op := range r.Job.Operators {
		if op.Kind != control.KindCollectSink {
			continue
		}
		for _, ref := range r.Dep.TasksOf(op.Name) {
			data, err := control.NewEnvelope(r.Job.JobID, "", control.TasksRequest{TaskIDs: []string{ref.ID}, WithValues: true})
			r.must(err)
			msg, err := r.Acts.NC.RequestWithContext(r.Ctx, control.WorkerSubject(ref.WorkerID, control.VerbStatus), data)
			r.must(err)
			var rep control.Reply
			r.must(json.Unmarshal(msg.Data, &rep))
			var st control.StatusReply
			r.must(json.Unmarshal(rep.Body, &st))
			for _, ts := range st.Tasks {
				for k, v := range ts.KeyValues {
					out[k] = max(out[k], v)
				}
			}
		}
	}
	return out
}

// ProduceWhile writes recs in order from another goroutine, chunk records
// every pause until done is closed, then the rest at once, so input flows
// for as long as something else runs (a reconfiguration). Wait returns
// once everything was acknowledged.
func (r *Run) ProduceWhile(recs []dataplane.Record, chunk int, pause time.Duration, done <-chan struct{}) (wait func()) {
	errc := make(chan error, 1)
	go func() {
		start := 0
		for start < len(recs) {
			end := min(start+chunk, len(recs))
			select {
			case <-done:
				end = len(recs)
			default:
			}
			if err := r.produceChunk(recs[start:end]); err != nil {
				errc <- err
				return
			}
			start = end
			select {
			case <-done:
			case <-time.After(pause):
			}
		}
		errc <- nil
	}()
	return func() {
		r.T.Helper()
		r.must(<-errc)
	}
}

// produceChunk writes recs synchronously.
func (r *Run) produceChunk(recs []dataplane.Record) error {
	batch := make([]*kgo.Record, 0, len(recs))
	for _, rec := range recs {
		kr := &kgo.Record{Key: rec.Key, Value: rec.Value, Timestamp: time.Unix(0, rec.EventTime)}
		if r.opts.ManualPartitions {
			kr.Partition = rec.Partition
		}
		batch = append(batch, kr)
	}
	return r.client.ProduceSync(r.Ctx, batch...).FirstErr()
}

// ProduceAsync writes recs in order from another goroutine, chunk records
// every pause, so they flow while the test does something else (a
// reconfiguration). Wait returns once everything was acknowledged.
func (r *Run) ProduceAsync(recs []dataplane.Record, chunk int, pause time.Duration) (wait func()) {
	done := make(chan error, 1)
	go func() {
		for start := 0; start < len(recs); start += chunk {
			end := min(start+chunk, len(recs))
			if err := r.produceChunk(recs[start:end]); err != nil {
				done <- err
				return
			}
			time.Sleep(pause)
		}
		done <- nil
	}()
	return func() {
		r.T.Helper()
		r.must(<-done)
	}
}
