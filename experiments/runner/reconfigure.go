package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"koala/activities"
	"koala/workflows"
)

// Reconfigure checks that the job runs, sends it the reconfigure update,
// waits for the update's result and prints it to out.
func Reconfigure(ctx context.Context, tc client.Client, jobID string, spec workflows.ReconfigSpec, out io.Writer) error {
	desc, err := tc.DescribeWorkflowExecution(ctx, jobID, "")
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return fmt.Errorf("job %s not found", jobID)
		}
		return fmt.Errorf("job %s: %w", jobID, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("job %s is not running (status %s)", jobID, strings.TrimPrefix(st.String(), "WorkflowExecutionStatus"))
	}
	h, err := tc.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: jobID, UpdateName: workflows.UpdateReconfigure, Args: []any{spec},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return updateError(jobID, err)
	}
	var res workflows.ReconfigureUpdateResult
	if err := h.Get(ctx, &res); err != nil {
		return updateError(jobID, err)
	}
	for _, o := range res.Outcomes {
		fmt.Fprintf(out, "reconfiguration %s done: %s %s in %.1fs (second %.1f to %.1f of the run)\n",
			o.WorkflowID, kindOf(o.Spec), o.Spec.TargetOperator, o.EndSec-o.StartSec, o.StartSec, o.EndSec)
		for _, s := range o.Steps {
			fmt.Fprintf(out, "  %-28s %9.1f ms\n", s.Step, s.Millis)
		}
		for _, m := range o.Moves {
			fmt.Fprintf(out, "  state moved by %s: %s\n", m.Step, activities.MoveSummary(m.Bytes, m.Millis, m.Bulk))
		}
	}
	fmt.Fprintf(out, "operator %s now has parallelism %d\n", spec.TargetOperator, res.Parallelism)
	return nil
}

func updateError(jobID string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("job %s not found", jobID)
	}
	return fmt.Errorf("rejected or failed: %w", err)
}

func kindOf(s workflows.ReconfigSpec) string {
	if s.Type == "" {
		return "scale"
	}
	return s.Type
}
