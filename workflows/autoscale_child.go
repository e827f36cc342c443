package workflows

import (
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"
)

// An experiment whose input has an Autoscaler policy (the config's
// "Autoscaler" block) runs the Autoscale workflow as a child, with the id
// AutoscalerID of the run's workflow id, from the moment its tasks run
// (RunExperiment calls startAutoscaler after goLive). The child ends by
// itself once the job's input ended; if the run ends first, closing it
// cancels the child. Runs without the field take no new command, so
// runs recorded before replay unchanged.

// startAutoscaler starts the child; it does not wait for it.
func startAutoscaler(ctx workflow.Context, in ExperimentInput) {
	if in.Autoscaler == nil {
		return
	}
	id := workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        AutoscalerID(id),
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		StaticSummary:     "autoscale " + id,
	})
	workflow.ExecuteChildWorkflow(cctx, Autoscale, AutoscaleInput{JobWorkflowID: id, Policy: *in.Autoscaler})
}

// autoscalerProblems checks the input's Autoscaler policy (validateInput).
func autoscalerProblems(in ExperimentInput) []string {
	if in.Autoscaler == nil {
		return nil
	}
	pol := in.Autoscaler.WithDefaults()
	var problems []string
	if err := pol.Validate(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			problems = append(problems, "Autoscaler."+line)
		}
	}
	if pol.MaxParallelism > in.NumBuckets {
		problems = append(problems, fmt.Sprintf("Autoscaler.MaxParallelism %d is above NumBuckets (%d)", pol.MaxParallelism, in.NumBuckets))
	}
	if pol.Protocol != "" && pol.Protocol != protocolName(in.ReconfigProtocol) {
		problems = append(problems, fmt.Sprintf("Autoscaler.Protocol %q is not the ReconfigProtocol %q (a reconfigure update runs the experiment's protocol)", pol.Protocol, protocolName(in.ReconfigProtocol)))
	}
	return problems
}
