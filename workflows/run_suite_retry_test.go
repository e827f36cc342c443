package workflows

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// timedChildren mocks RunExperiment like mockChildren and records when
// (seconds of workflow time after the suite started) each child started.
func timedChildren(env *testsuite.TestWorkflowEnvironment, fail map[string]bool) (ids *[]string, starts *[]float64) {
	var mu sync.Mutex
	ids, starts = &[]string{}, &[]float64{}
	var t0 time.Time
	env.RegisterWorkflow(RunExperiment)
	env.OnWorkflow(RunExperiment, mock.Anything, mock.Anything).Return(
		func(ctx workflow.Context, in ExperimentInput) (ExperimentResult, error) {
			id := workflow.GetInfo(ctx).WorkflowExecution.ID
			mu.Lock()
			if t0.IsZero() {
				t0 = workflow.Now(ctx)
			}
			*ids = append(*ids, id)
			*starts = append(*starts, workflow.Now(ctx).Sub(t0).Seconds())
			mu.Unlock()
			if err := workflow.Sleep(ctx, 60*time.Second); err != nil {
				return ExperimentResult{}, err
			}
			if fail[id] {
				return ExperimentResult{}, errors.New("worker w2 did not answer")
			}
			return ExperimentResult{JobID: JobIDFor(id), Produced: 600}, nil
		})
	return ids, starts
}

// TestRunSuite_RetriesAndCooldown: a failed entry runs again after the
// retry delay, under its own child id, up to MaxAttempts; every entry but
// the last is followed by its cool-down.
func TestRunSuite_RetriesAndCooldown(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "suite-t-1"})
	ids, starts := timedChildren(env, map[string]bool{"suite-t-1-2-sr": true, "suite-t-1-3-lazy-big": true, "suite-t-1-3-lazy-big-attempt2": true})
	in := suiteInput()
	in.RetryDelaySeconds = 10
	for i := range in.Entries {
		in.Entries[i].MaxAttempts, in.Entries[i].CooldownSeconds = 2, 30
	}
	env.ExecuteWorkflow(RunSuite, in)
	require.NoError(t, env.GetWorkflowError())
	var res SuiteResult
	require.NoError(t, env.GetWorkflowResult(&res))

	require.Equal(t, []string{"suite-t-1-1-lazy", "suite-t-1-2-sr", "suite-t-1-2-sr-attempt2", "suite-t-1-3-lazy-big", "suite-t-1-3-lazy-big-attempt2"}, *ids)
	// 60 s runs; 30 s cool-down after an entry; 10 s before a retry.
	require.Equal(t, []float64{0, 90, 160, 250, 320}, *starts)
	require.Len(t, res.Entries, 3)
	require.Equal(t, []string{SuiteSucceeded, SuiteSucceeded, SuiteFailed}, []string{res.Entries[0].Status, res.Entries[1].Status, res.Entries[2].Status})
	require.Equal(t, []int{1, 2, 2}, []int{res.Entries[0].Attempts, res.Entries[1].Attempts, res.Entries[2].Attempts})
	require.Equal(t, "suite-t-1-2-sr-attempt2", res.Entries[1].WorkflowID)
}

// TestRunSuite_StopOnFailure: the suite ends at the first entry that
// failed every attempt; without StopOnFailure it goes on.
func TestRunSuite_StopOnFailure(t *testing.T) {
	for _, stop := range []bool{true, false} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "suite-t-1"})
		ids, _ := timedChildren(env, map[string]bool{"suite-t-1-2-sr": true})
		in := suiteInput()
		in.StopOnFailure = stop
		env.ExecuteWorkflow(RunSuite, in)
		require.NoError(t, env.GetWorkflowError())
		var res SuiteResult
		require.NoError(t, env.GetWorkflowResult(&res))
		if stop {
			require.Equal(t, []string{"suite-t-1-1-lazy", "suite-t-1-2-sr"}, *ids)
			require.Len(t, res.Entries, 2)
			require.Equal(t, SuiteFailed, res.Entries[1].Status)
		} else {
			require.Len(t, *ids, 3)
			require.Len(t, res.Entries, 3)
		}
	}
}
