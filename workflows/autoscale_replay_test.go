package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"koala/workflows/autoscale"
)

// Histories of one real autoscaled run (testdata/README.md): a Temporal
// dev server, ClickHouse, and an in-process data plane whose counter
// costs 250 µs per record; the counter's input doubles at 30 s and halves
// at 60 s. The Autoscale history holds the scale-out 1→2, the holds of
// the scale-down delay and the scale-in 2→1, each sent as the run's
// "reconfigure" update; the RunExperiment history holds those updates
// and their ReconfigureLazy children.
var autoscaleHistories = []string{
	"testdata/autoscale_counter_step.json",
	"testdata/run_experiment_autoscaled_counter.json",
}

func TestReplayAutoscale(t *testing.T) {
	for _, file := range autoscaleHistories {
		t.Run(filepath.Base(file), func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			replayer.RegisterWorkflow(Autoscale)
			replayer.RegisterWorkflow(RunExperiment)
			replayer.RegisterWorkflow(ReconfigureLazy)
			require.NoError(t, replay(replayer, loadHistory(t, file)))
		})
	}
}

// The Autoscale replay has teeth: an autoscaler that decides without
// observing first does not replay the recorded history.
func TestReplayAutoscale_DetectsNonDeterminism(t *testing.T) {
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(autoscaleWithoutObserving, workflow.RegisterOptions{Name: "Autoscale"})
	err := replay(replayer, loadHistory(t, autoscaleHistories[0]))
	require.Error(t, err)
	require.Contains(t, err.Error(), "TMPRL1100", "want a non-determinism error")
}

func autoscaleWithoutObserving(ctx workflow.Context, in AutoscaleInput) (AutoscaleResult, error) {
	a := &autoscaler{in: in, pol: in.Policy.WithDefaults(), id: workflow.GetInfo(ctx).WorkflowExecution.ID}
	job, err := a.jobState(ctx)
	if err != nil {
		return AutoscaleResult{}, err
	}
	d, _ := autoscale.Decide(a.pol, job, autoscale.Observation{}, autoscale.Guards{})
	return AutoscaleResult{Ended: d.Skip}, workflow.Sleep(ctx, a.pol.Interval())
}
