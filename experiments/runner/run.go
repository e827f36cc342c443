package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"koala/experiments"
	"koala/workflows"
)

// RunOptions configure Run.
type RunOptions struct {
	Services
	Input      workflows.ExperimentInput
	ID         string // workflow id; empty: NAME-YYYYMMDD-HHMMSS
	ResultsDir string
	Detach     bool // return once the workflow started
}

// Run starts one experiment workflow, follows it and prints and writes its
// summary under ResultsDir/<workflow id>/.
func Run(ctx context.Context, o RunOptions) error {
	in := o.Input
	id := o.ID
	if id == "" {
		id = fmt.Sprintf("%s-%s", in.Name, time.Now().Format("20060102-150405"))
	}
	run, err := o.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		return fmt.Errorf("start experiment workflow %s: %w", id, err)
	}
	link := UILink(o.UIURL, o.Namespace, run.GetID(), run.GetRunID())
	fmt.Printf("experiment %s started\n  workflow: %s\n  ui:       %s\n", in.Name, run.GetID(), link)
	if o.Detach {
		return nil
	}
	res, err := Follow(ctx, run, "", in.TotalRuntimeSeconds, 0)
	if err != nil {
		fmt.Printf("  status:   %s\n", experiments.FailureStatus(err))
		return fmt.Errorf("experiment workflow %s failed: %w (see %s)", run.GetID(), err, link)
	}
	dir := filepath.Join(o.ResultsDir, run.GetID())
	sum, err := experiments.Report(res, experiments.ReportMeta{
		Experiment: in.Name, WorkflowID: run.GetID(), RunID: run.GetRunID(), UIURL: link, Dir: dir,
	})
	if err != nil {
		return err
	}
	if err := sum.WriteText(os.Stdout); err != nil {
		return err
	}
	if sum.Lost != 0 || sum.Duplicated != 0 || sum.Reordered != 0 {
		return fmt.Errorf("exactness violated: lost=%d duplicated=%d reordered=%d", sum.Lost, sum.Duplicated, sum.Reordered)
	}
	return nil
}
