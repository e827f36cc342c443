package workflows

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows/plan"
)

// twoKeyedJob is source → first (keyed) → second (keyed) → sink.
func twoKeyedJob(jobID string) control.JobSpec {
	job := helloJob(jobID)
	job.Operators = []control.OperatorSpec{
		{Name: "source", Kind: "kafka-source", Parallelism: 1},
		{Name: "first", Kind: "keyed-counter", Parallelism: 2, Inputs: []string{"source"}, Keyed: true, Stateful: true},
		{Name: "second", Kind: "keyed-counter", Parallelism: 2, Inputs: []string{"first"}, Keyed: true, Stateful: true},
		{Name: "sink", Kind: "collect-sink", Parallelism: 1, Inputs: []string{"second"}},
	}
	return job
}

func twoKeyedExperiment(protocol string, reconfigs ...ReconfigSpec) ExperimentInput {
	in := helloExperiment()
	in.QueryName = "two-keyed"
	in.TotalRuntimeSeconds = 300
	in.ReconfigProtocol = protocol
	in.Parallelism = map[string]int{"first": 2, "second": 2}
	in.Reconfigurations = reconfigs
	return in
}

// childRun is one mocked reconfiguration child: what it got, and the
// (mock) workflow times it started and completed.
type childRun struct {
	in         ReconfigureInput
	start, end time.Time
}

// mockedChildren runs every reconfiguration child as a real plan.Scale
// (plan.MigrateTask for a task migration) that takes childDuration of
// workflow time.
type mockedChildren struct {
	mu   sync.Mutex
	runs []childRun
}

const childDuration = 60 * time.Second

func (m *mockedChildren) register(env *testsuite.TestWorkflowEnvironment, wf any) {
	env.RegisterWorkflow(wf)
	env.OnWorkflow(wf, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
			start := workflow.Now(ctx)
			if err := workflow.Sleep(ctx, childDuration); err != nil {
				return ReconfigureResult{}, err
			}
			m.mu.Lock()
			m.runs = append(m.runs, childRun{in: in, start: start, end: workflow.Now(ctx)})
			m.mu.Unlock()
			var p plan.Plan
			var err error
			if in.Spec.Type == plan.KindTaskMigration {
				p, err = plan.MigrateTask(in.Current, in.Spec.TaskID, in.Spec.TargetWorker, in.Workers)
			} else {
				p, err = plan.Scale(in.Current, in.Spec.TargetOperator, in.Spec.TargetParallelism, in.Workers)
			}
			if err != nil {
				return ReconfigureResult{}, err
			}
			return ReconfigureResult{Deployment: p.New, Steps: []StepTiming{{Step: "plan", Millis: 1}}}, nil
		})
}

// byOperator returns the runs of op in start order.
func (m *mockedChildren) byOperator(op string) []childRun {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []childRun
	for _, r := range m.runs {
		if r.in.Spec.TargetOperator == op {
			out = append(out, r)
		}
	}
	return out
}

func runScheduled(t *testing.T, in ExperimentInput, wf any, updates func(env *testsuite.TestWorkflowEnvironment)) (*mockedChildren, ExperimentResult, error) {
	t.Helper()
	env := newTestEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "sched"})
	var calls activityLog
	mockExperimentActivities(env, &calls, experimentMocks{job: twoKeyedJob, ackedPerProducer: 10, sink: activities.SinkCounts{Received: 10, Distinct: 10, Tasks: 1}})
	children := &mockedChildren{}
	children.register(env, wf)
	if updates != nil {
		updates(env)
	}
	env.ExecuteWorkflow(RunExperiment, in)
	require.True(t, env.IsWorkflowCompleted())
	var res ExperimentResult
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&res))
	}
	return children, res, err
}

func scaleSpec(at int, op string, p int) ReconfigSpec {
	return ReconfigSpec{TriggerTimeSeconds: at, Type: plan.KindScaleUp, TargetOperator: op, TargetParallelism: p}
}

// Different operators whose trigger times overlap run concurrently: both
// children start before either completes, each planned from the
// deployment of its start, and the run ends with both changes.
func TestRunExperiment_DifferentOperatorsRunConcurrently(t *testing.T) {
	in := twoKeyedExperiment(ProtocolLazy, scaleSpec(30, "first", 4), scaleSpec(40, "second", 3))
	children, res, err := runScheduled(t, in, ReconfigureLazy, nil)
	require.NoError(t, err)
	first, second := children.byOperator("first"), children.byOperator("second")
	require.Len(t, first, 1)
	require.Len(t, second, 1)
	assert.True(t, second[0].start.Before(first[0].end), "second started at %s, after first completed at %s", second[0].start, first[0].end)
	assert.True(t, first[0].start.Before(second[0].end))
	assert.Equal(t, 10*time.Second, second[0].start.Sub(first[0].start), "each starts at its own trigger time")
	assert.Equal(t, 2, parallelismOf(second[0].in.Current, "first"), "planned from the deployment when it started")
	assert.Equal(t, 4, parallelismOf(res.Final, "first"), "both results are merged")
	assert.Equal(t, 3, parallelismOf(res.Final, "second"))
	require.NoError(t, plan.Validate(res.Final))
	require.Len(t, res.Reconfigs, 2)
	assert.Equal(t, "sched-reconfig-1", res.Reconfigs[0].WorkflowID)
	assert.Equal(t, "sched-reconfig-2", res.Reconfigs[1].WorkflowID)
	assert.InDelta(t, 30, res.Reconfigs[0].StartSec, 0.5)
	assert.InDelta(t, 40, res.Reconfigs[1].StartSec, 0.5)
	assert.InDelta(t, 100, res.Reconfigs[1].EndSec, 0.5)
}

// Two reconfigurations of the same operator queue: the second starts when
// the first completes, planned from its result.
func TestRunExperiment_SameOperatorQueues(t *testing.T) {
	in := twoKeyedExperiment(ProtocolLazy, scaleSpec(30, "first", 3), scaleSpec(40, "first", 4))
	children, res, err := runScheduled(t, in, ReconfigureLazy, nil)
	require.NoError(t, err)
	runs := children.byOperator("first")
	require.Len(t, runs, 2)
	assert.False(t, runs[1].start.Before(runs[0].end), "second started at %s, before the first completed at %s", runs[1].start, runs[0].end)
	assert.Equal(t, 3, parallelismOf(runs[1].in.Current, "first"), "the queued one is planned from the first's result")
	assert.Equal(t, 4, parallelismOf(res.Final, "first"))
	require.Len(t, res.Reconfigs, 2)
	assert.InDelta(t, 90, res.Reconfigs[1].StartSec, 0.5, "StartSec shows the wait")
}

// Stop-and-restart pauses the whole job: different operators queue too.
func TestRunExperiment_StopAndRestartQueuesAcrossOperators(t *testing.T) {
	in := twoKeyedExperiment(ProtocolStopAndRestart, scaleSpec(30, "first", 4), scaleSpec(40, "second", 3))
	children, res, err := runScheduled(t, in, ReconfigureStopAndRestart, nil)
	require.NoError(t, err)
	first, second := children.byOperator("first"), children.byOperator("second")
	require.Len(t, first, 1)
	require.Len(t, second, 1)
	assert.False(t, second[0].start.Before(first[0].end), "second started at %s, before the first completed at %s", second[0].start, first[0].end)
	assert.Equal(t, 4, parallelismOf(res.Final, "first"))
	assert.Equal(t, 3, parallelismOf(res.Final, "second"))
}

// updateResult is what one "reconfigure" update ended with.
type updateResult struct {
	rejected  error
	completed bool
	result    ReconfigureUpdateResult
	err       error
}

func sendUpdate(env *testsuite.TestWorkflowEnvironment, at time.Duration, id string, spec ReconfigSpec, out *updateResult) {
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(UpdateReconfigure, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { out.rejected = err },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				out.completed, out.err = true, err
				if r, ok := v.(ReconfigureUpdateResult); ok {
					out.result = r
				}
			},
		}, spec)
	}, at)
}

// The validator rejects each invalid request with a message naming the
// problem; an accepted request runs as a child and returns its outcome.
func TestRunExperiment_ReconfigureUpdate(t *testing.T) {
	rejections := []struct {
		name string
		spec ReconfigSpec
		want string
	}{
		{"unknown operator", scaleSpec(0, "nope", 2), `operator "nope" not found (operators: source, first, second, sink)`},
		{"parallelism 0", scaleSpec(0, "second", 0), "target_parallelism 0 for operator second: must be between 1 and NumBuckets (128)"},
		{"parallelism above NumBuckets", scaleSpec(0, "second", 129), "target_parallelism 129 for operator second: must be between 1 and NumBuckets (128)"},
		{"migration to an unknown worker", ReconfigSpec{Type: plan.KindTaskMigration, TargetOperator: "second", TaskID: "second-0", TargetWorker: "w9"},
			`task-migration: worker "w9" is not one of the job's workers (w1, w2, w3)`},
		{"operator being reconfigured", scaleSpec(0, "first", 3), "operator first is being reconfigured (workflow ID sched-reconfig-1)"},
		{"unknown type", ReconfigSpec{Type: "shuffle", TargetOperator: "second", TargetParallelism: 3}, `type "shuffle" is unknown`},
		{"same parallelism", scaleSpec(0, "second", 2), `operator "second" already has parallelism 2`},
	}
	results := make([]updateResult, len(rejections))
	var accepted, afterEnd updateResult
	// "first" is being reconfigured from second 30 to 90 by the config,
	// and again from 290 to 350, past the end of the input at 300.
	in := twoKeyedExperiment(ProtocolLazy, scaleSpec(30, "first", 4), scaleSpec(290, "first", 2))
	children, res, err := runScheduled(t, in, ReconfigureLazy, func(env *testsuite.TestWorkflowEnvironment) {
		for i, r := range rejections {
			sendUpdate(env, 45*time.Second, fmt.Sprintf("bad-%d", i), r.spec, &results[i])
		}
		sendUpdate(env, 50*time.Second, "good", scaleSpec(0, "second", 3), &accepted)
		sendUpdate(env, 320*time.Second, "late", scaleSpec(0, "second", 4), &afterEnd)
	})
	require.NoError(t, err)
	for i, r := range rejections {
		require.Errorf(t, results[i].rejected, "%s: not rejected", r.name)
		assert.Containsf(t, results[i].rejected.Error(), r.want, "%s", r.name)
		assert.Falsef(t, results[i].completed, "%s: a rejected request runs nothing", r.name)
	}
	require.NoError(t, accepted.rejected)
	require.True(t, accepted.completed, "the update completes with its reconfiguration")
	require.NoError(t, accepted.err)
	require.Len(t, accepted.result.Outcomes, 1)
	assert.Equal(t, "sched-reconfig-2", accepted.result.Outcomes[0].WorkflowID)
	assert.Equal(t, 3, accepted.result.Parallelism)
	second := children.byOperator("second")
	require.Len(t, second, 1)
	assert.True(t, second[0].start.Before(children.byOperator("first")[0].end), "the request ran concurrently with the config's reconfiguration of first")
	assert.Equal(t, 3, parallelismOf(res.Final, "second"))
	assert.Equal(t, 2, parallelismOf(res.Final, "first"))
	require.Error(t, afterEnd.rejected, "no request after the input ended")
	assert.Contains(t, afterEnd.rejected.Error(), "input has ended")
}
