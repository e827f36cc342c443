package workflows

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func suiteInput() SuiteInput {
	in := helloExperiment()
	entry := func(name, kw, protocol string) SuiteEntry {
		e := in
		e.Name, e.ReconfigProtocol = name, protocol
		return SuiteEntry{Keyword: kw, Input: e}
	}
	return SuiteInput{Name: "t", Entries: []SuiteEntry{
		entry("counter_small", "lazy", ProtocolLazy),
		entry("counter_small", "sr", ProtocolStopAndRestart),
		entry("counter_big", "lazy big", ProtocolLazy),
	}}
}

// childCalls records the RunExperiment children the mock was asked to run.
type childCalls struct {
	mu  sync.Mutex
	ids []string
}

func (c *childCalls) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
}

// mockChildren mocks RunExperiment: each child takes 60 s of workflow time,
// the ones whose id is in fail fail.
func mockChildren(env *testsuite.TestWorkflowEnvironment, calls *childCalls, fail map[string]bool) {
	env.RegisterWorkflow(RunExperiment)
	env.OnWorkflow(RunExperiment, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in ExperimentInput) (ExperimentResult, error) {
			id := workflow.GetInfo(ctx).WorkflowExecution.ID
			calls.add(id)
			start := workflow.Now(ctx)
			if err := workflow.Sleep(ctx, 60*time.Second); err != nil {
				return ExperimentResult{}, err
			}
			if fail[id] {
				return ExperimentResult{}, errors.New("worker w2 did not answer")
			}
			return ExperimentResult{JobID: JobIDFor(id), StartedAt: start, Produced: 600}, nil
		})
}

func TestRunSuite_RunsInOrderAndContinuesAfterFailure(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "suite-t-1"})
	calls := &childCalls{}
	mockChildren(env, calls, map[string]bool{"suite-t-1-2-sr": true})

	// Mid-suite the progress query names the running entry and the done ones.
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(SuiteProgressQuery)
		require.NoError(t, err)
		var p SuiteProgress
		require.NoError(t, v.Get(&p))
		require.Equal(t, 2, p.Current)
		require.Equal(t, "suite-t-1-2-sr", p.ChildID)
		require.Len(t, p.Done, 1)
		require.Equal(t, SuiteSucceeded, p.Done[0].Status)
	}, 90*time.Second)

	env.ExecuteWorkflow(RunSuite, suiteInput())
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res SuiteResult
	require.NoError(t, env.GetWorkflowResult(&res))

	// One after another, each exactly once, with deterministic ids.
	require.Equal(t, []string{"suite-t-1-1-lazy", "suite-t-1-2-sr", "suite-t-1-3-lazy-big"}, calls.ids)
	require.Len(t, res.Entries, 3)
	want := []struct{ kw, status, id string }{
		{"lazy", SuiteSucceeded, "suite-t-1-1-lazy"},
		{"sr", SuiteFailed, "suite-t-1-2-sr"},
		{"lazy big", SuiteSucceeded, "suite-t-1-3-lazy-big"},
	}
	for i, w := range want {
		e := res.Entries[i]
		require.Equal(t, i+1, e.Index)
		require.Equal(t, w.kw, e.Keyword)
		require.Equal(t, w.status, e.Status)
		require.Equal(t, w.id, e.WorkflowID)
		require.InDelta(t, 60, e.Seconds, 1)
	}
	require.Contains(t, res.Entries[1].Error, "worker w2 did not answer")
	require.Equal(t, "counter_big", res.Entries[2].Experiment)
	require.Equal(t, int64(600), res.Entries[0].Produced)
}

func TestRunSuite_ExactnessViolationIsFailed(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(RunExperiment)
	env.OnWorkflow(RunExperiment, mock.Anything, mock.Anything).Return(ExperimentResult{Produced: 10, Lost: 1}, nil)
	in := suiteInput()
	in.Entries = in.Entries[:1]
	env.ExecuteWorkflow(RunSuite, in)
	require.NoError(t, env.GetWorkflowError())
	var res SuiteResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, SuiteFailed, res.Entries[0].Status)
	require.Contains(t, res.Entries[0].Error, "lost=1")
}

func TestRunSuite_EmptySuiteFails(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.ExecuteWorkflow(RunSuite, SuiteInput{Name: "empty"})
	require.Error(t, env.GetWorkflowError())
}

// A controller restart is a replay: the new controller rebuilds RunSuite's
// state from its history. The suite's children have fixed ids and their
// completions are in the history, so the replay must re-issue no child for a
// completed entry — or it would fail with a non-determinism error. The test
// replays histories of real suite runs (exported with `temporal workflow show
// --output json`) in full and cut just after the second child started (a
// controller that died mid-suite), with a RunExperiment that fails the test
// if it is ever run:
//
//   - run_suite_smoke.json: the 2-entry smoke suite;
//   - run_suite_section5_2_restart.json: the 6-entry section 5.2 suite
//     during which the controller was killed (entry 2 running) and started
//     again 45 s later; its workflow tasks were completed by both controller
//     processes and each entry's child was started exactly once.
func TestRunSuite_ReplayDoesNotRerunCompletedChildren(t *testing.T) {
	for _, file := range []string{"testdata/run_suite_smoke.json", "testdata/run_suite_section5_2_restart.json"} {
		t.Run(file, func(t *testing.T) { replaySuiteHistory(t, file) })
	}
}

func TestRunSuite_RecordedRestartSpansTwoControllers(t *testing.T) {
	h := loadHistory(t, "testdata/run_suite_section5_2_restart.json")
	ids := map[string]bool{}
	for _, ev := range h.GetEvents() {
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			ids[a.GetIdentity()] = true
		}
	}
	require.GreaterOrEqual(t, len(ids), 2, "the suite was continued by a second controller process")
	require.Equal(t, 6, countChildStarts(h))
}

func replaySuiteHistory(t *testing.T, file string) {
	full := loadHistory(t, file)
	var ran int
	newReplayer := func() worker.WorkflowReplayer {
		r := worker.NewWorkflowReplayer()
		r.RegisterWorkflow(RunSuite)
		r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ExperimentInput) (ExperimentResult, error) {
			ran++
			return ExperimentResult{}, errors.New("a replayed suite must not run a child")
		}, workflow.RegisterOptions{Name: "RunExperiment"})
		return r
	}

	// The full history replays with today's code.
	require.NoError(t, replay(newReplayer(), full))

	// Cut after the second child's start: the first child's completion is
	// in the history, the second is running.
	var starts, completions int
	cut := -1
	for i, ev := range full.GetEvents() {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			starts++
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED:
			completions++
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
			if starts == 2 && cut < 0 {
				cut = i + 1
			}
		}
	}
	require.GreaterOrEqual(t, starts, 2, "the recorded suite must have at least two entries")
	require.Equal(t, starts, completions, "every child of the recorded suite completed")
	require.Equal(t, starts, countChildStarts(full), "each entry's child was started exactly once")
	require.Positive(t, cut)
	partial := &historypb.History{Events: full.GetEvents()[:cut]}
	require.NoError(t, replay(newReplayer(), partial))
	require.Zero(t, ran, "replay ran a child workflow")

	// The test has teeth: a suite that would start its children under other
	// ids (e.g. one that re-runs entry 1 after a restart) does not replay.
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(func(ctx workflow.Context, in SuiteInput) (SuiteResult, error) {
		in.Entries[0].Keyword += "-again"
		return RunSuite(ctx, in)
	}, workflow.RegisterOptions{Name: "RunSuite"})
	r.RegisterWorkflow(RunExperiment)
	err := replay(r, partial)
	require.Error(t, err)
	require.Contains(t, err.Error(), "TMPRL1100", "want a non-determinism error")
}

// countChildStarts counts distinct child workflow ids started in h.
func countChildStarts(h *historypb.History) int {
	ids := map[string]bool{}
	for _, ev := range h.GetEvents() {
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil {
			ids[a.GetWorkflowId()] = true
		}
	}
	return len(ids)
}
