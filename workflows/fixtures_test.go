package workflows

import (
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows/plan"
)

// newTestEnv is a workflow test environment whose SDK log goes to the
// test's output, shown only for failed tests or with -v.
func newTestEnv(t *testing.T) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), nil))))
	env := ts.NewTestWorkflowEnvironment()
	relaxDeadlockDetection(env)
	return env
}

// relaxDeadlockDetection keeps the SDK's one-second "workflow did not
// yield" check from failing tests when a loaded machine starves them.
func relaxDeadlockDetection(env *testsuite.TestWorkflowEnvironment) {
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
}

// Fixtures shared by the workflow tests: three workers and the hello query
// (source → keyed mapper → sink), as BuildJob would resolve it.

func testWorkers() []control.WorkerInfo {
	return []control.WorkerInfo{
		{ID: "w1", DataAddr: "127.0.0.1:7101", Slots: 4},
		{ID: "w2", DataAddr: "127.0.0.1:7102", Slots: 4},
		{ID: "w3", DataAddr: "127.0.0.1:7103", Slots: 4},
	}
}

func helloJob(jobID string) control.JobSpec {
	return control.JobSpec{
		JobID:      jobID,
		Experiment: "hello-test",
		Query:      "hello",
		Operators: []control.OperatorSpec{
			{Name: "source", Kind: "kafka-source", Parallelism: 1},
			{Name: "mapper", Kind: "hello-mapper", Parallelism: 1, Inputs: []string{"source"}, Keyed: true},
			{Name: "sink", Kind: "count-sink", Parallelism: 1, Inputs: []string{"mapper"}},
		},
		NumBuckets:   128,
		BatchSize:    1000,
		Topic:        "koala-" + jobID,
		Partitions:   4,
		KafkaBrokers: []string{"127.0.0.1:9092"},
	}
}

// initialDeployment places helloJob on the three test workers.
func initialDeployment(t *testing.T, jobID string) control.Deployment {
	t.Helper()
	dep, err := plan.Initial(helloJob(jobID), testWorkers())
	require.NoError(t, err)
	return dep
}

// planScaleAsActivity does what activities.PlanScale does, without the
// event recording: the real planner, invalid requests non-retryable.
func planScaleAsActivity(in activities.PlanInput) (plan.Plan, error) {
	p, err := plan.Scale(in.Current, in.Operator, in.Parallelism, in.Workers)
	if err != nil {
		return plan.Plan{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidReconfiguration", err)
	}
	return p, nil
}

// activityLog records mocked activity calls in the order they ran, with
// their input and the (mock) workflow time of the call.
type activityLog struct {
	mu    sync.Mutex
	calls []loggedCall
}

type loggedCall struct {
	Activity string
	Input    any
	At       time.Time
}

func (l *activityLog) add(activity string, in any, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, loggedCall{Activity: activity, Input: in, At: at})
}

// names lists the activities called, in order.
func (l *activityLog) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.calls))
	for _, c := range l.calls {
		out = append(out, c.Activity)
	}
	return out
}

// of returns every call of one activity, in order.
func (l *activityLog) of(activity string) []loggedCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []loggedCall
	for _, c := range l.calls {
		if c.Activity == activity {
			out = append(out, c)
		}
	}
	return out
}

// index is the position of the first call of activity, or -1.
func (l *activityLog) index(activity string) int {
	return slices.Index(l.names(), activity)
}

func tasksOf(t *testing.T, c loggedCall) activities.TasksInput {
	t.Helper()
	in, ok := c.Input.(activities.TasksInput)
	require.Truef(t, ok, "%s input is %T, want activities.TasksInput", c.Activity, c.Input)
	return in
}

func stepNames(steps []StepTiming) []string {
	out := make([]string, 0, len(steps))
	for _, s := range steps {
		out = append(out, s.Step)
	}
	return out
}

func parallelismOf(dep control.Deployment, op string) int {
	spec, _ := dep.Job.Operator(op)
	return spec.Parallelism
}
