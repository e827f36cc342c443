package workflows

import (
	"fmt"
	"strings"
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
	moves    []StateMove
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
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(r.ctx, withSummary(r.ctx, r.summary(step))), fn, arg)
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

// summary is the line the Temporal UI shows for step: its name, and for
// a task migration's plan step which task moves where. A summary is user
// metadata that replay does not compare, so it may change freely.
func (r *stepRunner) summary(step string) string {
	if step == "plan" {
		if s := migrationSummary(r.in.Spec, r.in.Current, r.in.Workers); s != "" {
			return "plan: " + s
		}
	}
	return step
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
	return ReconfigureResult{Deployment: dep, Steps: r.steps, Moves: r.moves}
}

// awaitMigration runs the await-migration step named step and records the
// state move it measured (see StateMove). moveStart is the eager handoff's
// StartedAt for a bulk move, zero for a lazy one.
//
// The Temporal UI shows the move twice: in the step's result (its
// MigrationReport, with Summary "12.3 MB in 0.16 s (77 MB/s)"), and in the
// reconfiguration workflow's current details, one line per move so far.
// Neither adds a command: histories from before replay unchanged.
func (r *stepRunner) awaitMigration(step string, in activities.AwaitMigrationInput, moveStart time.Time) error {
	in.MoveStart = moveStart
	var rep activities.MigrationReport
	if err := r.run(step, a.AwaitMigration, in, &rep); err != nil {
		return err
	}
	m := StateMove{Step: step, Bytes: rep.Bytes, Millis: rep.Millis, Bulk: rep.Since == activities.MoveSinceHandoff, Summary: rep.Summary}
	if rep.Since == "" { // recorded by an AwaitMigration that did not time the move
		m.Summary = activities.BytesText(float64(rep.Bytes)) + " moved (not timed)"
	}
	r.moves = append(r.moves, m)
	workflow.SetCurrentDetails(r.ctx, movesDetails(r.protocol, r.moves))
	return nil
}

// movesDetails is the markdown the Temporal UI shows as a reconfiguration's
// current details: the state each of its steps moved.
func movesDetails(protocol string, moves []StateMove) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**State moved** (%s)\n", protocol)
	for _, m := range moves {
		fmt.Fprintf(&b, "- %s: %s\n", m.Step, m.Summary)
	}
	if len(moves) > 0 && moves[0].Bulk {
		b.WriteString("\nMB/s = bytes / (eager handoff start → last new owner migrated)\n")
	}
	return b.String()
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

// showMoves sets the experiment workflow's current details in the Temporal
// UI to the state its finished reconfigurations moved, one line each (no
// change while none moved any). It adds no command.
func showMoves(ctx workflow.Context, outcomes []ReconfigOutcome) {
	var b strings.Builder
	for _, o := range outcomes {
		for _, m := range o.Moves {
			fmt.Fprintf(&b, "- %s %s: %s\n", o.ID, m.Step, m.Summary)
		}
	}
	if b.Len() > 0 {
		workflow.SetCurrentDetails(ctx, "**State moved by reconfigurations**\n"+b.String())
	}
}
