package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
)

// a is only used for method references; Temporal calls the registered value.
var a *activities.Activities

// stepRunner runs protocol steps as activities and times them with
// workflow time, which is deterministic on replay.
type stepRunner struct {
	ctx      workflow.Context
	in       ReconfigureInput
	protocol string
	steps    []StepTiming
}

func newStepRunner(ctx workflow.Context, in ReconfigureInput, protocol string) *stepRunner {
	return &stepRunner{ctx: ctx, in: in, protocol: protocol}
}

func (r *stepRunner) info(step string) activities.StepInfo {
	return activities.StepInfo{
		Experiment: r.in.Current.Job.Experiment, JobID: r.in.Current.Job.JobID,
		ReconfigID: r.in.ReconfigID, Protocol: r.protocol, Step: step,
	}
}

func (r *stepRunner) run(step string, fn, arg, result any) error {
	start := workflow.Now(r.ctx)
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, withSummary(r.ctx, step)), fn, arg)
	var err error
	if result != nil {
		err = f.Get(r.ctx, result)
	} else {
		err = f.Get(r.ctx, nil)
	}
	r.steps = append(r.steps, StepTiming{Step: step, Millis: float64(workflow.Now(r.ctx).Sub(start)) / float64(time.Millisecond)})
	if err != nil {
		return fmt.Errorf("reconfiguration %s step %s: %w", r.in.ReconfigID, step, err)
	}
	return nil
}

// resumeOld is the compensation when the new tasks cannot start: the old
// routing is still installed, so resuming the sources restores the job.
func (r *stepRunner) resumeOld(old control.Deployment, cause error) (ReconfigureResult, error) {
	if err := r.run("compensate-resume", a.ResumeSources, activities.TasksInput{Deployment: old, Step: r.info("compensate-resume")}, nil); err != nil {
		return r.result(old), fmt.Errorf("%w; compensation failed too: %v", cause, err)
	}
	return r.result(old), cause
}

func (r *stepRunner) result(dep control.Deployment) ReconfigureResult {
	return ReconfigureResult{Deployment: dep, Steps: r.steps}
}

func withSummary(ctx workflow.Context, step string) workflow.ActivityOptions {
	opts := workflow.GetActivityOptions(ctx)
	opts.Summary = step
	return opts
}

// stepOptions bound each step and retry it with backoff; invalid requests
// fail at once through non-retryable errors.
func stepOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: 6 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        200 * time.Millisecond,
			BackoffCoefficient:     2,
			MaximumInterval:        10 * time.Second,
			MaximumAttempts:        5,
			NonRetryableErrorTypes: []string{"InvalidReconfiguration", "BadQuery", "BadConfig"},
		},
	}
}

func taskIDs(refs []control.TaskRef) []string {
	out := make([]string, 0, len(refs))
	for _, t := range refs {
		out = append(out, t.ID)
	}
	return out
}

func workerIDs(ws []control.WorkerInfo) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}
