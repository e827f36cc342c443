package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/autoscale"
)

// fakeScaledJob is the job an Autoscale workflow under test scales: its
// state, the load its operators report, and the rescales it received.
type fakeScaledJob struct {
	mu    sync.Mutex
	state autoscale.JobState
	// load is each operator's load at a window's end; nil: the counter
	// runs at 7000 records per busy second on 14000/s.
	load func(at time.Time, st autoscale.JobState) []autoscale.OperatorLoad
	// endAfter ends the job after that many JobState calls (0: never).
	endAfter, stateCalls int
	// rescale answers a rescale; nil: done, and the parallelism changes.
	rescale func(in activities.RescaleInput) (activities.RescaleOutcome, error)
	// observeErr fails every observation.
	observeErr error
	rescales   []activities.RescaleInput
	observed   []activities.ObserveInput
	records    []activities.RecordInput
	events     []string // "start op" / "end op" of rescales, in order
	lastTo     time.Time
}

var autoscaleT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func twoOperatorState() autoscale.JobState {
	return autoscale.JobState{
		JobID: "exp-1", WorkflowID: "exp-1", Status: autoscale.StatusRunning, Protocol: ProtocolLazy, NumBuckets: 32, Partitions: 4, PerOperator: true,
		Operators: []autoscale.Operator{
			{Name: "source", Kind: "kafka-source", Parallelism: 1, Source: true},
			{Name: "first", Kind: "keyed-counter", Parallelism: 2, Inputs: []string{"source"}},
			{Name: "second", Kind: "keyed-counter", Parallelism: 2, Inputs: []string{"first"}},
			{Name: "sink", Kind: "collect-sink", Parallelism: 1, Inputs: []string{"second"}, Sink: true},
		},
	}
}

// loadAt: the source reads `in`/s, every keyed operator processes it at
// perTask records per busy second.
func loadAt(in, perTask float64) func(time.Time, autoscale.JobState) []autoscale.OperatorLoad {
	return func(_ time.Time, st autoscale.JobState) []autoscale.OperatorLoad {
		var out []autoscale.OperatorLoad
		for _, op := range st.Operators {
			l := autoscale.OperatorLoad{Operator: op.Name, Tasks: op.Parallelism, RecordsIn: in, RecordsOut: in, Busy: in / perTask}
			if op.Source || op.Sink {
				l.Busy = in / 1e6
			}
			out = append(out, l)
		}
		return out
	}
}

func (f *fakeScaledJob) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivity(&activities.Autoscaler{})
	env.OnActivity(sa.AutoscaleJobState, mock.Anything, mock.Anything).Return(
		func(_ context.Context, id string) (autoscale.JobState, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.stateCalls++
			if f.endAfter > 0 && f.stateCalls > f.endAfter {
				f.state.Status, f.state.Detail = autoscale.StatusEnded, "its input ended (TotalRuntimeSeconds=300)"
			}
			return cloneState(f.state), nil
		})
	env.OnActivity(sa.AutoscaleObserve, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ObserveInput) (autoscale.Observation, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.observed = append(f.observed, in)
			if f.observeErr != nil {
				return autoscale.Observation{}, f.observeErr
			}
			to := f.lastTo.Add(time.Duration(in.Policy.IntervalSeconds) * time.Second)
			if f.lastTo.IsZero() {
				to = autoscaleT0
			}
			if in.NotBefore.After(to) {
				to = in.NotBefore
			}
			f.lastTo = to
			load := f.load
			if load == nil {
				load = loadAt(14000, 7000)
			}
			return autoscale.Observation{From: in.Policy.WindowStart(to, in.LastChange), To: to, Operators: load(to, f.state)}, nil
		})
	env.OnActivity(sa.AutoscaleRescale, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RescaleInput) (activities.RescaleOutcome, error) {
			f.mu.Lock()
			f.rescales = append(f.rescales, in)
			f.events = append(f.events, "start "+in.Change.Operator)
			answer := f.rescale
			f.mu.Unlock()
			out := activities.RescaleOutcome{WorkflowID: "exp-1-reconfig-" + in.Change.Operator, Parallelism: in.Change.To}
			var err error
			if answer != nil {
				out, err = answer(in)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, "end "+in.Change.Operator)
			out.Ended = f.lastTo.Add(2 * time.Second)
			if err == nil && out.Rejected == "" && out.Failed == "" {
				for i := range f.state.Operators {
					if f.state.Operators[i].Name == in.Change.Operator {
						f.state.Operators[i].Parallelism = in.Change.To
					}
				}
			}
			return out, err
		})
	env.OnActivity(sa.AutoscaleRecord, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecordInput) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.records = append(f.records, in)
			return nil
		})
}

func cloneState(st autoscale.JobState) autoscale.JobState {
	st.Operators = slices.Clone(st.Operators)
	st.Reconfiguring = slices.Clone(st.Reconfiguring)
	return st
}

func runAutoscale(t *testing.T, f *fakeScaledJob, pol autoscale.Policy, during func(env *testsuite.TestWorkflowEnvironment)) (AutoscaleResult, error) {
	t.Helper()
	env := newTestEnv(t)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: AutoscalerID("exp-1")})
	f.register(env)
	if during != nil {
		during(env)
	}
	env.ExecuteWorkflow(Autoscale, AutoscaleInput{JobWorkflowID: "exp-1", Policy: pol})
	require.True(t, env.IsWorkflowCompleted())
	var res AutoscaleResult
	err := env.GetWorkflowError()
	if err == nil {
		require.NoError(t, env.GetWorkflowResult(&res))
	}
	return res, err
}

var testAutoscalePolicy = autoscale.Policy{IntervalSeconds: 5, WindowSeconds: 10, StabilizationSeconds: 5, ScaleDownDelaySeconds: 20}

func TestAutoscale_BadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input func(*AutoscaleInput)
		state func(*autoscale.JobState)
		gone  bool
		want  string
	}{
		{name: "no job", input: func(in *AutoscaleInput) { in.JobWorkflowID = "" }, want: "JobWorkflowID (--job) is required"},
		{name: "utilization above 1", input: func(in *AutoscaleInput) { in.Policy.TargetUtilization = 1.5 },
			want: "TargetUtilization (--target-utilization): 1.5 is outside (0, 1]"},
		{name: "negative utilization", input: func(in *AutoscaleInput) { in.Policy.TargetUtilization = -1 }, want: "--target-utilization"},
		{name: "max above NumBuckets", input: func(in *AutoscaleInput) { in.Policy.MaxParallelism = 64 },
			want: "MaxParallelism (--max-parallelism): 64 is above the job's NumBuckets (32)"},
		{name: "job not running", state: func(st *autoscale.JobState) {
			st.Status, st.Detail = autoscale.StatusEnded, "its workflow is Completed"
		},
			want: "JobID (--job): job exp-1 is not running (its workflow is Completed)"},
		{name: "job does not exist", gone: true, want: "JobID (--job): job exp-1 not found"},
		{name: "protocol differs", input: func(in *AutoscaleInput) { in.Policy.Protocol = ProtocolStopAndRestart },
			want: `Protocol (--protocol): "stop-and-restart", but job exp-1 reconfigures with "lazy"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			f := &fakeScaledJob{state: twoOperatorState()}
			if tc.state != nil {
				tc.state(&f.state)
			}
			if tc.gone {
				env.RegisterActivity(&activities.Autoscaler{Jobs: goneJobs{}})
			} else {
				f.register(env)
			}
			in := AutoscaleInput{JobWorkflowID: "exp-1", Policy: testAutoscalePolicy}
			if tc.input != nil {
				tc.input(&in)
			}
			env.ExecuteWorkflow(Autoscale, in)
			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr))
			assert.True(t, appErr.NonRetryable(), "bad input is not retried")
			assert.Empty(t, f.observed, "nothing is observed for bad input")
			assert.Empty(t, f.rescales)
		})
	}
}

// goneJobs is a JobControl for a job that does not exist.
type goneJobs struct{}

func (goneJobs) JobState(_ context.Context, id string) (autoscale.JobState, error) {
	return autoscale.JobState{}, fmt.Errorf("job %s not found: %w", id, activities.ErrJobGone)
}

func (goneJobs) Rescale(context.Context, string, string, autoscale.Change) (activities.RescaleOutcome, error) {
	return activities.RescaleOutcome{}, activities.ErrJobGone
}

// Both keyed operators are at twice their target utilization: one
// decision scales both (concurrently: the job is lazy), each change is
// recorded, and the autoscaler ends with the job's input.
func TestAutoscale_ScalesOutConcurrentlyAndEndsWithTheJob(t *testing.T) {
	f := &fakeScaledJob{state: twoOperatorState(), endAfter: 8}
	// Each rescale waits (bounded) until the other started: they run at
	// the same time, or the first fails.
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	f.rescale = func(in activities.RescaleInput) (activities.RescaleOutcome, error) {
		arrived.Done()
		select {
		case <-both:
		case <-time.After(10 * time.Second):
			return activities.RescaleOutcome{}, errors.New("the other rescale never started")
		}
		return activities.RescaleOutcome{WorkflowID: "exp-1-reconfig-" + in.Change.Operator, Parallelism: in.Change.To}, nil
	}
	var status AutoscaleStatus
	res, err := runAutoscale(t, f, testAutoscalePolicy, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(QueryAutoscaleStatus)
			require.NoError(t, err)
			require.NoError(t, v.Get(&status))
		}, 20*time.Second)
	})
	require.NoError(t, err)
	require.Len(t, f.rescales, 2)
	for _, r := range f.rescales {
		assert.Equal(t, 3, r.Change.To, "14000/s over tasks of 7000/s at 0.7: 2.86 → 3")
	}
	assert.ElementsMatch(t, []string{"start first", "start second"}, f.events[:2], "both rescales start before either ends")
	i := slices.IndexFunc(f.rescales, func(r activities.RescaleInput) bool { return r.Change.Operator == "first" })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, "exp-1-autoscaler-1-first", f.rescales[i].UpdateID)
	assert.Equal(t, "first 2→3: true rate 7 K/s/task, input 14 K/s", f.rescales[i].Change.Summary)
	assert.Equal(t, 2, res.Changes)
	assert.Contains(t, res.Ended, "job exp-1 ended: its input ended")
	require.Len(t, f.records, 1, "one decision, recorded once")
	assert.Len(t, f.records[0].Decision.Changes, 2)
	assert.Equal(t, autoscale.OutcomeDone, f.records[0].Decision.Changes[0].Outcome)
	assert.Equal(t, "exp-1-autoscaler", f.records[0].Autoscaler)
	require.Len(t, status.Decisions, 1, "the status query shows the decision")
	assert.Equal(t, 2, status.Changes)
}

// A stop-and-restart job takes one reconfiguration at a time: the
// changes of one decision go one after the other.
func TestAutoscale_SequentialWithoutPerOperatorLanes(t *testing.T) {
	st := twoOperatorState()
	st.Protocol, st.PerOperator = ProtocolStopAndRestart, false
	f := &fakeScaledJob{state: st, endAfter: 4}
	_, err := runAutoscale(t, f, testAutoscalePolicy, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"start first", "end first", "start second", "end second"}, f.events)
}

// A rejected request (someone else reconfigures the operator) is an
// outcome: recorded, not counted, no stabilization; the autoscaler goes on
// and sends it again on a later tick.
func TestAutoscale_RejectedRequestIsRecordedAndRetried(t *testing.T) {
	st := twoOperatorState()
	st.Operators = slices.DeleteFunc(st.Operators, func(op autoscale.Operator) bool { return op.Name == "second" })
	st.Operators[2].Inputs = []string{"first"}
	f := &fakeScaledJob{state: st, endAfter: 6}
	rejected := 0
	f.rescale = func(in activities.RescaleInput) (activities.RescaleOutcome, error) {
		if rejected == 0 {
			rejected++
			return activities.RescaleOutcome{Rejected: "reconfigure job exp-1: operator first is being reconfigured (workflow ID exp-1-reconfig-3)"}, nil
		}
		return activities.RescaleOutcome{WorkflowID: "exp-1-reconfig-4", Parallelism: in.Change.To}, nil
	}
	res, err := runAutoscale(t, f, testAutoscalePolicy, nil)
	require.NoError(t, err)
	require.Len(t, f.rescales, 2)
	assert.Equal(t, 1, res.Changes)
	require.Len(t, res.Decisions, 2)
	first := res.Decisions[0].Changes[0]
	assert.Equal(t, autoscale.OutcomeRejected, first.Outcome)
	assert.Contains(t, res.Decisions[0].Line(), "[rejected: reconfigure job exp-1: operator first is being reconfigured")
	// Nothing changed, so the next tick needs no stabilization: it is the
	// next interval's window.
	assert.Equal(t, f.observed[0].LastChange, f.observed[1].LastChange)
	assert.Equal(t, autoscale.OutcomeDone, res.Decisions[1].Changes[0].Outcome)
}

// While a reconfiguration runs (someone else's), no metrics are read and
// nothing is decided.
func TestAutoscale_NoDecisionWhileAReconfigurationRuns(t *testing.T) {
	st := twoOperatorState()
	st.Reconfiguring = []autoscale.Running{{Operator: "first", WorkflowID: "exp-1-reconfig-1"}}
	f := &fakeScaledJob{state: st, endAfter: 5}
	var status AutoscaleStatus
	res, err := runAutoscale(t, f, testAutoscalePolicy, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(QueryAutoscaleStatus)
			require.NoError(t, err)
			require.NoError(t, v.Get(&status))
		}, 7*time.Second)
	})
	require.NoError(t, err)
	assert.Empty(t, f.observed)
	assert.Empty(t, f.rescales)
	assert.Zero(t, res.Changes)
	assert.Equal(t, "reconfiguration exp-1-reconfig-1 of first is running", status.Last.Skip)
}

// Cancelling the workflow stops it.
func TestAutoscale_StopsWhenCancelled(t *testing.T) {
	f := &fakeScaledJob{state: twoOperatorState(), load: loadAt(7000, 7000)} // 2 tasks at 0.5: no change
	_, err := runAutoscale(t, f, testAutoscalePolicy, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(env.CancelWorkflow, time.Minute)
	})
	require.Error(t, err)
	assert.True(t, temporal.IsCanceledError(err), "%v", err)
	assert.NotEmpty(t, f.observed)
	assert.Empty(t, f.rescales)
}

// A long-lived autoscaler continues as new, carrying its memory.
func TestAutoscale_ContinuesAsNewWithItsMemory(t *testing.T) {
	f := &fakeScaledJob{state: twoOperatorState(), load: loadAt(7000, 7000)}
	env := newTestEnv(t)
	f.register(env)
	env.ExecuteWorkflow(Autoscale, AutoscaleInput{JobWorkflowID: "exp-1", Policy: testAutoscalePolicy})
	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(err, &can), "%v", err)
	var next AutoscaleInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.NotNil(t, next.Carry)
	assert.Equal(t, autoscaleTicksPerRun, next.Carry.Ticks)
	assert.False(t, next.Carry.LastWindowEnd.IsZero())
	assert.Equal(t, "exp-1", next.JobWorkflowID)
}

func TestAutoscaleSpecAndRejection(t *testing.T) {
	assert.Equal(t, ReconfigSpec{Type: "scaleup", TargetOperator: "counter", TargetParallelism: 4}, AutoscaleSpec(autoscale.Change{Operator: "counter", From: 2, To: 4}))
	assert.Equal(t, ReconfigSpec{Type: "scaledown", TargetOperator: "counter", TargetParallelism: 1}, AutoscaleSpec(autoscale.Change{Operator: "counter", From: 2, To: 1}))
	// The validator's errors are rejections; a reconfiguration's are not.
	s := newReconfigScheduler(nil, twoKeyedExperiment(ProtocolLazy), JobIDFor("exp/1"))
	err := s.validateRequest(scaleSpec(0, "first", 3))
	require.Error(t, err)
	assert.True(t, IsReconfigureRejection("exp/1", err), "%v", err)
	assert.True(t, IsReconfigureRejection("exp/1", temporal.NewApplicationError(err.Error(), "")))
	assert.False(t, IsReconfigureRejection("exp/1", errors.New("reconfiguration exp-1-reconfig-1 step plan: boom")))
	assert.False(t, IsReconfigureRejection("exp/2", err), "another job's")
	assert.False(t, IsReconfigureRejection("exp/1", nil))
	out := AutoscaleOutcome(ReconfigureUpdateResult{Outcomes: []ReconfigOutcome{{WorkflowID: "exp-1-reconfig-2"}}, Parallelism: 4}, nil, nil, autoscaleT0)
	assert.Equal(t, activities.RescaleOutcome{WorkflowID: "exp-1-reconfig-2", Parallelism: 4, Ended: autoscaleT0}, out)
	assert.Equal(t, "no", AutoscaleOutcome(ReconfigureUpdateResult{}, errors.New("no"), nil, autoscaleT0).Rejected)
	assert.Equal(t, "boom", AutoscaleOutcome(ReconfigureUpdateResult{}, nil, errors.New("boom"), autoscaleT0).Failed)
}

// An experiment with an Autoscaler policy starts its Autoscale child
// once the job runs; a bad policy is refused with the run's input.
func TestRunExperiment_StartsItsAutoscaler(t *testing.T) {
	var got []AutoscaleInput
	var ids []string
	in := twoKeyedExperiment(ProtocolLazy)
	in.Autoscaler = &autoscale.Policy{TargetUtilization: 0.6, MaxParallelism: 8}
	_, _, err := runScheduled(t, in, ReconfigureLazy, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflow(Autoscale)
		env.OnWorkflow(Autoscale, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, ain AutoscaleInput) (AutoscaleResult, error) {
			got = append(got, ain)
			ids = append(ids, workflow.GetInfo(ctx).WorkflowExecution.ID)
			return AutoscaleResult{Ended: "job sched ended"}, nil
		})
	})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "sched", got[0].JobWorkflowID)
	assert.Equal(t, *in.Autoscaler, got[0].Policy)
	assert.Equal(t, []string{"sched-autoscaler"}, ids)

	// Without a policy, no child.
	got = nil
	_, _, err = runScheduled(t, twoKeyedExperiment(ProtocolLazy), ReconfigureLazy, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterWorkflow(Autoscale)
		env.OnWorkflow(Autoscale, mock.Anything, mock.Anything).Return(func(workflow.Context, AutoscaleInput) (AutoscaleResult, error) {
			got = append(got, AutoscaleInput{})
			return AutoscaleResult{}, nil
		}).Maybe()
	})
	require.NoError(t, err)
	assert.Empty(t, got)

	for _, tc := range []struct {
		pol  autoscale.Policy
		want string
	}{
		{autoscale.Policy{TargetUtilization: 2}, "Autoscaler.TargetUtilization (--target-utilization): 2 is outside (0, 1]"},
		{autoscale.Policy{MaxParallelism: 500}, "Autoscaler.MaxParallelism 500 is above NumBuckets (128)"},
		{autoscale.Policy{Protocol: ProtocolDRRS}, `Autoscaler.Protocol "drrs" is not the ReconfigProtocol "lazy"`},
	} {
		bad := twoKeyedExperiment(ProtocolLazy)
		bad.Autoscaler = &tc.pol
		_, _, err := runScheduled(t, bad, ReconfigureLazy, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// Metrics that cannot be read skip the tick; the autoscaler goes on.
func TestAutoscale_UnreadableMetricsSkipTheTick(t *testing.T) {
	f := &fakeScaledJob{state: twoOperatorState(), endAfter: 3,
		observeErr: temporal.NewNonRetryableApplicationError("metrics: clickhouse: connection refused", "Unavailable", nil)}
	env := newTestEnv(t)
	f.register(env)
	env.ExecuteWorkflow(Autoscale, AutoscaleInput{JobWorkflowID: "exp-1", Policy: testAutoscalePolicy})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res AutoscaleResult
	require.NoError(t, env.GetWorkflowResult(&res))
	assert.Equal(t, 3, res.Ticks)
	assert.Len(t, f.observed, 3, "every tick tried")
	assert.Zero(t, res.Changes)
	assert.Empty(t, f.rescales)
	assert.Contains(t, res.Ended, "ended")
}
