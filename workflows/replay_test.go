package workflows

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/plan"
)

// Histories of a real run of the hello query (one stop-and-restart scale-out
// of mapper 1→2 at 8 s), exported from a Temporal dev server; see
// testdata/README.md. Replaying them with today's code fails on any change
// that would break workflows in flight.
//
// The two-operators histories are a lazy run of the two-counters query that
// scales counter 2→4 and groupsum 2→3 at the same second, so they cover the
// concurrent-reconfiguration scheduler, the worker watch and ReconfigureLazy.
//
// The counter histories come from `koala compare
// experiments/bench/counter-lazy-2to4.json`: a DRRS scale-out 2→4 with
// ordered subscale handoffs (version drrs-ordered-handoff) and a
// stop-and-restart scale-out whose bulk move is reported in its result.
var replayHistories = []string{
	"testdata/run_experiment_hello_short.json",
	"testdata/reconfigure_stop_and_restart_hello_short.json",
	"testdata/run_experiment_two_operators_lazy.json",
	"testdata/reconfigure_lazy_two_operators_1.json",
	"testdata/reconfigure_lazy_two_operators_2.json",
	"testdata/reconfigure_drrs_counter_ordered.json",
	"testdata/reconfigure_stop_and_restart_counter_bulk.json",
}

func quietLogger() log.Logger { return log.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// loadHistory reads a `temporal workflow show --output json` export. A
// missing file fails the test: the histories must be checked in.
func loadHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err, "replay history must be checked in (see testdata/README.md)")
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, h.GetEvents())
	return h
}

// replay replays h under its original workflow id. The id matters:
// RunExperiment derives the job id, and from it the child workflow ids, from
// its own workflow id, while ReplayWorkflowHistoryFromJSONFile would replay
// under the placeholder id "ReplayId" and report a false non-determinism.
func replay(r worker.WorkflowReplayer, h *historypb.History) error {
	started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	return r.ReplayWorkflowHistoryWithOptions(quietLogger(), h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()},
	})
}

func TestReplay(t *testing.T) {
	for _, file := range replayHistories {
		t.Run(filepath.Base(file), func(t *testing.T) {
			h := loadHistory(t, file)
			replayer := worker.NewWorkflowReplayer()
			replayer.RegisterWorkflow(RunExperiment)
			replayer.RegisterWorkflow(ReconfigureStopAndRestart)
			replayer.RegisterWorkflow(ReconfigureLazy)
			replayer.RegisterWorkflow(ReconfigureDRRS)
			require.NoError(t, replay(replayer, h))
		})
	}
}

// TestReplay_DetectsNonDeterminism checks that the replay test has teeth: a
// ReconfigureStopAndRestart that no longer pauses before deploying must not
// replay the recorded history.
func TestReplay_DetectsNonDeterminism(t *testing.T) {
	h := loadHistory(t, "testdata/reconfigure_stop_and_restart_hello_short.json")
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(reconfigureWithoutPause, workflow.RegisterOptions{Name: "ReconfigureStopAndRestart"})
	err := replay(replayer, h)
	require.Error(t, err)
	require.Contains(t, err.Error(), "TMPRL1100", "want a non-determinism error")
}

func reconfigureWithoutPause(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	var p plan.Plan
	if err := workflow.ExecuteActivity(ctx, a.PlanScale, activities.PlanInput{
		Current: in.Current, Operator: in.Spec.TargetOperator, Parallelism: in.Spec.TargetParallelism, Workers: in.Workers,
	}).Get(ctx, &p); err != nil {
		return ReconfigureResult{}, err
	}
	err := workflow.ExecuteActivity(ctx, a.DeployTasks, activities.TasksInput{Deployment: p.New}).Get(ctx, nil)
	return ReconfigureResult{Deployment: p.New}, err
}
