package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"koala/activities"
	"koala/workflows"
	"koala/workflows/autoscale"
)

// TemporalJobs is the autoscaler's activities.JobControl over a Temporal
// client: it describes and queries a RunExperiment (workflows.QueryJobState)
// and sends it "reconfigure" updates.
type TemporalJobs struct{ Client client.Client }

var _ activities.JobControl = TemporalJobs{}

// JobState implements activities.JobControl.
func (j TemporalJobs) JobState(ctx context.Context, workflowID string) (autoscale.JobState, error) {
	desc, err := j.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return autoscale.JobState{}, fmt.Errorf("job %s not found: %w", workflowID, activities.ErrJobGone)
	}
	if err != nil {
		return autoscale.JobState{}, fmt.Errorf("describe job %s: %w", workflowID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if typ := info.GetType().GetName(); typ != "RunExperiment" {
		return autoscale.JobState{}, fmt.Errorf("workflow %s is a %s, not an experiment (RunExperiment): %w", workflowID, typ, activities.ErrJobGone)
	}
	if st := info.GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return autoscale.JobState{JobID: workflows.JobIDFor(workflowID), WorkflowID: workflowID, Status: autoscale.StatusEnded,
			Detail: "its workflow is " + strings.TrimPrefix(st.String(), "WorkflowExecutionStatus")}, nil
	}
	v, err := j.Client.QueryWorkflow(ctx, workflowID, "", workflows.QueryJobState)
	if err != nil {
		var qf *serviceerror.QueryFailed
		if errors.As(err, &qf) && strings.Contains(qf.Error(), "unknown queryType") {
			return autoscale.JobState{}, fmt.Errorf("job %s does not answer the %q query: it was started by a controller from before autoscaling; start the experiment again: %w",
				workflowID, workflows.QueryJobState, activities.ErrJobGone)
		}
		return autoscale.JobState{}, fmt.Errorf("query the state of job %s: %w", workflowID, err)
	}
	var st autoscale.JobState
	if err := v.Get(&st); err != nil {
		return st, fmt.Errorf("decode the state of job %s: %w", workflowID, err)
	}
	return st, nil
}

// Rescale implements activities.JobControl: the update with id updateID,
// waited for until it completed.
func (j TemporalJobs) Rescale(ctx context.Context, workflowID, updateID string, c autoscale.Change) (activities.RescaleOutcome, error) {
	h, err := j.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateID: updateID, UpdateName: workflows.UpdateReconfigure,
		Args: []any{workflows.AutoscaleSpec(c)}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return activities.RescaleOutcome{}, fmt.Errorf("job %s not found: %w", workflowID, activities.ErrJobGone)
	}
	if err == nil {
		var res workflows.ReconfigureUpdateResult
		if err = h.Get(ctx, &res); err == nil {
			return workflows.AutoscaleOutcome(res, nil, nil, time.Now()), nil
		}
	}
	if workflows.IsReconfigureRejection(workflowID, err) {
		return workflows.AutoscaleOutcome(workflows.ReconfigureUpdateResult{}, err, nil, time.Now()), nil
	}
	if ctx.Err() != nil {
		return activities.RescaleOutcome{}, fmt.Errorf("reconfigure update %s: %w", updateID, err)
	}
	var childErr *temporal.ChildWorkflowExecutionError
	if temporal.IsApplicationError(err) || errors.As(err, &childErr) || temporal.IsCanceledError(err) || temporal.IsTimeoutError(err) {
		// The update's handler failed: the reconfiguration ran and failed.
		return workflows.AutoscaleOutcome(workflows.ReconfigureUpdateResult{}, nil, err, time.Now()), nil
	}
	return activities.RescaleOutcome{}, fmt.Errorf("reconfigure update %s: %w", updateID, err)
}

// StartAutoscaler checks the job and the policy (pol with its defaults
// filled, as the flags give it), starts the job's Autoscale workflow and
// prints how to watch and stop it.
func StartAutoscaler(ctx context.Context, tc client.Client, jobWorkflowID string, pol autoscale.Policy, out io.Writer) (client.WorkflowRun, error) {
	if jobWorkflowID == "" {
		return nil, errors.New("--job is required: the workflow id of a running experiment (as printed by `koala run`)")
	}
	if err := pol.Validate(); err != nil {
		return nil, err
	}
	st, err := TemporalJobs{tc}.JobState(ctx, jobWorkflowID)
	if errors.Is(err, activities.ErrJobGone) {
		return nil, fmt.Errorf("%s: %w", autoscale.FieldJob, err)
	}
	if err != nil {
		return nil, err
	}
	if err := pol.ValidateFor(st); err != nil {
		return nil, err
	}
	id := workflows.AutoscalerID(jobWorkflowID)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflows.TaskQueue, StaticSummary: "autoscale " + jobWorkflowID,
	}, workflows.Autoscale, workflows.AutoscaleInput{JobWorkflowID: jobWorkflowID, Policy: pol})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, fmt.Errorf("an autoscaler for job %s is already running (workflow ID %s); stop it first: koala autoscale stop --job %s", jobWorkflowID, id, jobWorkflowID)
	}
	if err != nil {
		return nil, fmt.Errorf("start the autoscaler of job %s: %w", jobWorkflowID, err)
	}
	fmt.Fprintf(out, "autoscaler %s started for job %s (%s protocol)\n", id, jobWorkflowID, st.Protocol)
	fmt.Fprintf(out, "policy      %s\n", policyLine(pol))
	fmt.Fprintf(out, "status      koala autoscale status --job %s\n", jobWorkflowID)
	fmt.Fprintf(out, "stop        koala autoscale stop --job %s   (or cancel workflow %s)\n", jobWorkflowID, id)
	return run, nil
}

// FollowAutoscaler prints the autoscaler's decisions as they are made
// (polling its status every interval) until it ends or ctx is done.
func FollowAutoscaler(ctx context.Context, tc client.Client, run client.WorkflowRun, every time.Duration, out io.Writer) error {
	printed := 0
	show := func(ds []autoscale.Decision) {
		for _, d := range ds {
			if d.Seq > printed {
				fmt.Fprintf(out, "  %s\n", d.Line())
				printed = d.Seq
			}
		}
	}
	done := make(chan error, 1)
	var res workflows.AutoscaleResult
	go func() { done <- run.Get(ctx, &res) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			show(res.Decisions)
			if err != nil {
				return fmt.Errorf("autoscaler %s: %w", run.GetID(), err)
			}
			fmt.Fprintf(out, "autoscaler ended after %d ticks and %d changes: %s\n", res.Ticks, res.Changes, res.Ended)
			return nil
		case <-ctx.Done():
			return nil // detached; the autoscaler runs on
		case <-tick.C:
			if st, err := queryAutoscaler(ctx, tc, run.GetID()); err == nil {
				show(st.Decisions)
			}
		}
	}
}

func queryAutoscaler(ctx context.Context, tc client.Client, id string) (workflows.AutoscaleStatus, error) {
	var st workflows.AutoscaleStatus
	v, err := tc.QueryWorkflow(ctx, id, "", workflows.QueryAutoscaleStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// AutoscalerStatus prints the state and the last decisions of the job's autoscaler.
func AutoscalerStatus(ctx context.Context, tc client.Client, jobWorkflowID string, out io.Writer) error {
	id := workflows.AutoscalerID(jobWorkflowID)
	desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("job %s has no autoscaler (no workflow %s); start one with koala autoscale --job %s", jobWorkflowID, id, jobWorkflowID)
	}
	if err != nil {
		return fmt.Errorf("autoscaler %s: %w", id, err)
	}
	status := strings.ToLower(strings.TrimPrefix(desc.GetWorkflowExecutionInfo().GetStatus().String(), "WorkflowExecutionStatus"))
	st, err := queryAutoscaler(ctx, tc, id)
	if err != nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		// A closed workflow is queried by replaying it on a worker; with
		// none running, its result holds the same decisions.
		var res workflows.AutoscaleResult
		if gerr := tc.GetWorkflow(ctx, id, "").Get(ctx, &res); gerr == nil {
			fmt.Fprintf(out, "autoscaler  %s (%s) for job %s: %d ticks, %d changes; %s\n", id, status, jobWorkflowID, res.Ticks, res.Changes, res.Ended)
			printDecisions(out, res.Decisions)
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("status of autoscaler %s (%s): %w", id, status, err)
	}
	PrintAutoscaleStatus(out, id, status, st)
	return nil
}

func printDecisions(out io.Writer, ds []autoscale.Decision) {
	if len(ds) == 0 {
		fmt.Fprintln(out, "decisions   none yet")
		return
	}
	fmt.Fprintln(out, "decisions")
	for _, d := range ds {
		fmt.Fprintf(out, "  %s\n", d.Line())
	}
}

// PrintAutoscaleStatus renders an autoscaler's status.
func PrintAutoscaleStatus(out io.Writer, id, status string, st workflows.AutoscaleStatus) {
	fmt.Fprintf(out, "autoscaler  %s (%s) for job %s: %d ticks, %d changes\n", id, status, st.JobWorkflowID, st.Ticks, st.Changes)
	fmt.Fprintf(out, "policy      %s\n", policyLine(st.Policy))
	if st.Last.Seq > 0 {
		fmt.Fprintf(out, "last tick   %s\n", st.Last.Line())
		for _, e := range st.Last.Estimates {
			fmt.Fprintf(out, "            %-12s %d tasks, DS2 %d: input %s/s, true rate %s/s/task, utilization %.2f%s\n",
				e.Operator, e.Current, e.Target, autoscale.Rate(e.Input), autoscale.Rate(e.TrueRate), e.Utilization, lagText(e))
		}
	}
	for _, r := range st.Running {
		fmt.Fprintf(out, "running     %s\n", r)
	}
	printDecisions(out, st.Decisions)
}

func lagText(e autoscale.Estimate) string {
	if e.Lag == 0 && e.Arrival == 0 {
		return ""
	}
	return fmt.Sprintf(", Kafka lag %s", autoscale.Rate(e.Lag))
}

// PolicyLine renders a policy's settings on one line.
func PolicyLine(p autoscale.Policy) string { return policyLine(p) }

func policyLine(p autoscale.Policy) string {
	s := fmt.Sprintf("DS2 at utilization %g, every %gs over %gs of metrics, catch-up %gs, stabilization %gs, scale-down delay %gs, min change %d",
		p.TargetUtilization, p.IntervalSeconds, p.WindowSeconds, p.CatchUpSeconds, p.StabilizationSeconds, p.ScaleDownDelaySeconds, p.MinChange)
	if p.MaxParallelism > 0 {
		s += fmt.Sprintf(", max %d", p.MaxParallelism)
	}
	if len(p.Operators) > 0 {
		s += ", operators " + strings.Join(p.Operators, ",")
	}
	return s
}

// StopAutoscaler cancels the job's autoscaler.
func StopAutoscaler(ctx context.Context, tc client.Client, jobWorkflowID string, out io.Writer) error {
	id := workflows.AutoscalerID(jobWorkflowID)
	desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("job %s has no autoscaler (no workflow %s)", jobWorkflowID, id)
	}
	if err != nil {
		return fmt.Errorf("autoscaler %s: %w", id, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return fmt.Errorf("the autoscaler of job %s is not running (workflow %s is %s)", jobWorkflowID, id,
			strings.ToLower(strings.TrimPrefix(st.String(), "WorkflowExecutionStatus")))
	}
	if err := tc.CancelWorkflow(ctx, id, ""); err != nil {
		return fmt.Errorf("stop autoscaler %s: %w", id, err)
	}
	fmt.Fprintf(out, "autoscaler %s cancelled\n", id)
	return nil
}
