package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/autoscale"
	"koala/workflows/plan"
)

// QueryAutoscaleStatus is the Autoscale workflow's query for its state
// and its last decisions (AutoscaleStatus); `koala autoscale status`
// prints it.
const QueryAutoscaleStatus = "autoscale-status"

// autoscaleTicksPerRun bounds one run's history (about ten events a
// tick); the workflow then continues as new with its memory.
const autoscaleTicksPerRun = 360

// autoscaleLogSize is how many recorded decisions the status keeps.
const autoscaleLogSize = 20

// AutoscalerID is the workflow id of the autoscaler of the experiment
// whose workflow id is jobWorkflowID.
func AutoscalerID(jobWorkflowID string) string { return jobWorkflowID + "-autoscaler" }

// AutoscaleInput starts an Autoscale workflow.
type AutoscaleInput struct {
	// JobWorkflowID is the workflow id of the running RunExperiment
	// (`koala autoscale --job`).
	JobWorkflowID string           `json:"job_workflow_id"`
	Policy        autoscale.Policy `json:"policy"`
	// Carry is the memory a run hands to the next (continue-as-new).
	Carry *AutoscaleCarry `json:"carry,omitempty"`
}

// AutoscaleCarry is what an Autoscale run remembers across continue-as-new.
type AutoscaleCarry struct {
	Ticks         int                  `json:"ticks"`
	Changes       int                  `json:"changes"`
	Guards        autoscale.Guards     `json:"guards"`
	LastWindowEnd time.Time            `json:"last_window_end,omitempty"`
	Log           []autoscale.Decision `json:"log,omitempty"`
}

// AutoscaleResult is how an autoscaler ended.
type AutoscaleResult struct {
	// Ended says why: the job's input ended, its workflow closed, ...
	Ended   string `json:"ended"`
	Ticks   int    `json:"ticks"`
	Changes int    `json:"changes"`
	// Decisions are the last recorded decisions (changes and holds).
	Decisions []autoscale.Decision `json:"decisions"`
}

// AutoscaleStatus answers QueryAutoscaleStatus.
type AutoscaleStatus struct {
	JobWorkflowID string           `json:"job_workflow_id"`
	Policy        autoscale.Policy `json:"policy"`
	Ticks         int              `json:"ticks"`
	Changes       int              `json:"changes"`
	// Last is the latest tick, recorded or not; Decisions the last
	// recorded ones, oldest first; Running the changes being made now.
	Last      autoscale.Decision   `json:"last"`
	Decisions []autoscale.Decision `json:"decisions"`
	Running   []string             `json:"running,omitempty"`
}

// sa is only used for method references; Temporal calls the registered value.
var sa *activities.Autoscaler

// Autoscale scales the operators of one running experiment with DS2
// (package workflows/autoscale) until the experiment's input ends or the
// workflow is cancelled. Every tick (Policy.IntervalSeconds) it reads the
// job's state (RunExperiment's QueryJobState) and, when the job runs and
// no reconfiguration does, its operators' load over the last window of
// metrics (AutoscaleObserve). Decide computes DS2's targets and passes
// them through the guards; each change goes to the job as a "reconfigure"
// update (AutoscaleRescale; the job's protocol, lazy by default) — all at
// once where the job reconfigures operators concurrently, else one after
// the other. Every decision that changes or holds back a parallelism is
// recorded (AutoscaleRecord: ClickHouse table autoscale_decisions), shown
// as the rescale activity's summary ("counter 2→4: true rate 9.1 K/s/task,
// input 30 K/s") and in the workflow's current details, and answered to
// QueryAutoscaleStatus.
//
// Bad input fails it at once, naming the field and its flag: no job id, a
// job that is not running, a policy out of range (Policy.Validate), a
// MaxParallelism above the job's NumBuckets (Policy.ValidateFor).
func Autoscale(ctx workflow.Context, in AutoscaleInput) (AutoscaleResult, error) {
	pol := in.Policy.WithDefaults()
	bad := func(err error) error {
		msg := fmt.Sprintf("autoscaler for job %s: %v", in.JobWorkflowID, strings.ReplaceAll(err.Error(), "\n", "; "))
		return temporal.NewNonRetryableApplicationError(msg, "BadConfig", nil)
	}
	if in.JobWorkflowID == "" {
		return AutoscaleResult{}, bad(errors.New("JobWorkflowID (--job) is required: the workflow id of a running experiment"))
	}
	if err := pol.Validate(); err != nil {
		return AutoscaleResult{}, bad(err)
	}
	a := &autoscaler{in: in, pol: pol, id: workflow.GetInfo(ctx).WorkflowExecution.ID}
	if in.Carry != nil {
		a.carry = *in.Carry
	}
	if err := workflow.SetQueryHandler(ctx, QueryAutoscaleStatus, func() (AutoscaleStatus, error) { return a.status(), nil }); err != nil {
		return a.result(""), err
	}
	job, err := a.jobState(ctx)
	if err != nil {
		return a.result(""), err
	}
	if in.Carry == nil {
		if err := pol.ValidateFor(job); err != nil {
			return a.result(""), bad(err)
		}
	}
	for run := 0; ; run++ {
		if job.Status == autoscale.StatusEnded {
			return a.result(fmt.Sprintf("job %s ended: %s", in.JobWorkflowID, job.Detail)), nil
		}
		if run == autoscaleTicksPerRun {
			next := in
			next.Carry = &a.carry
			return a.result(""), workflow.NewContinueAsNewError(ctx, Autoscale, next)
		}
		if err := a.tick(ctx, job); err != nil {
			return a.result(""), err
		}
		if err := workflow.Sleep(ctx, pol.Interval()); err != nil {
			return a.result("cancelled"), err
		}
		if job, err = a.jobState(ctx); err != nil {
			return a.result(""), err
		}
	}
}

// autoscaler is one Autoscale run's state; only workflow code touches it.
type autoscaler struct {
	in      AutoscaleInput
	pol     autoscale.Policy
	id      string
	carry   AutoscaleCarry
	last    autoscale.Decision
	running []string
}

func (a *autoscaler) status() AutoscaleStatus {
	return AutoscaleStatus{JobWorkflowID: a.in.JobWorkflowID, Policy: a.pol, Ticks: a.carry.Ticks, Changes: a.carry.Changes,
		Last: a.last, Decisions: a.carry.Log, Running: a.running}
}

func (a *autoscaler) result(ended string) AutoscaleResult {
	return AutoscaleResult{Ended: ended, Ticks: a.carry.Ticks, Changes: a.carry.Changes, Decisions: a.carry.Log}
}

func (a *autoscaler) options(summary string, timeout time.Duration, attempts int32) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second, MaximumAttempts: attempts,
			NonRetryableErrorTypes: []string{"BadConfig", activities.ErrTypeJobGone},
		},
		Summary: summary,
	}
}

func (a *autoscaler) jobState(ctx workflow.Context) (autoscale.JobState, error) {
	var st autoscale.JobState
	actx := workflow.WithActivityOptions(ctx, a.options("job-state", 30*time.Second, 10))
	err := workflow.ExecuteActivity(actx, sa.AutoscaleJobState, a.in.JobWorkflowID).Get(ctx, &st)
	return st, err
}

// tick observes, decides, applies and records once.
func (a *autoscaler) tick(ctx workflow.Context, job autoscale.JobState) error {
	a.carry.Ticks++
	var obs autoscale.Observation
	if job.Status == autoscale.StatusRunning && len(job.Reconfiguring) == 0 {
		lastChange := a.carry.Guards.LastChange
		if job.LastReconfigEnd.After(lastChange) {
			lastChange = job.LastReconfigEnd
		}
		in := activities.ObserveInput{JobID: job.JobID, Policy: a.pol, LastChange: lastChange,
			NotBefore: a.pol.NextWindowEnd(a.carry.LastWindowEnd, lastChange)}
		timeout := a.pol.Interval() + time.Duration(a.pol.WindowSeconds+a.pol.StabilizationSeconds)*time.Second + 2*time.Minute
		actx := workflow.WithActivityOptions(ctx, a.options(fmt.Sprintf("observe #%d", a.carry.Ticks), timeout, 5))
		if err := workflow.ExecuteActivity(actx, sa.AutoscaleObserve, in).Get(ctx, &obs); err != nil {
			if temporal.IsCanceledError(err) {
				return err
			}
			// No metrics this tick (ClickHouse unreachable, ...): no decision.
			a.last = autoscale.Decision{Seq: a.carry.Ticks, Skip: "no metrics: " + err.Error()}
			return nil
		}
		a.carry.LastWindowEnd = obs.To
	}
	d, g := autoscale.Decide(a.pol, job, obs, a.carry.Guards)
	d.Seq, a.carry.Guards = a.carry.Ticks, g
	if d.Acted() {
		if err := a.apply(ctx, job, &d); err != nil {
			return err
		}
	}
	a.last = d
	if !d.Recorded() {
		return nil
	}
	a.carry.Log = append(a.carry.Log, d)
	if n := len(a.carry.Log); n > autoscaleLogSize {
		a.carry.Log = append([]autoscale.Decision(nil), a.carry.Log[n-autoscaleLogSize:]...)
	}
	workflow.SetCurrentDetails(ctx, a.details())
	// Best effort: the decision is in the history and the status either way.
	actx := workflow.WithActivityOptions(ctx, a.options(fmt.Sprintf("record #%d", d.Seq), time.Minute, 3))
	if err := workflow.ExecuteActivity(actx, sa.AutoscaleRecord, activities.RecordInput{JobID: job.JobID, Autoscaler: a.id, Decision: d}).Get(ctx, nil); err != nil {
		if temporal.IsCanceledError(err) {
			return err
		}
		workflow.GetLogger(ctx).Warn("autoscale decision not recorded", "seq", d.Seq, "error", err)
	}
	return nil
}

// apply sends d's changes: concurrently where the job reconfigures
// operators concurrently, else one after the other.
func (a *autoscaler) apply(ctx workflow.Context, job autoscale.JobState, d *autoscale.Decision) error {
	futures := make([]workflow.Future, len(d.Changes))
	for i, c := range d.Changes {
		a.running = append(a.running, c.Summary)
		actx := workflow.WithActivityOptions(ctx, a.options(c.Summary, 30*time.Minute, 5))
		futures[i] = workflow.ExecuteActivity(actx, sa.AutoscaleRescale, activities.RescaleInput{
			WorkflowID: a.in.JobWorkflowID, UpdateID: fmt.Sprintf("%s-%d-%s", a.id, d.Seq, c.Operator), Change: c,
		})
		if !job.PerOperator {
			if err := a.settle(ctx, d, i, futures[i]); err != nil {
				return err
			}
		}
	}
	if job.PerOperator {
		for i, f := range futures {
			if err := a.settle(ctx, d, i, f); err != nil {
				return err
			}
		}
	}
	a.running = nil
	return nil
}

// settle records the outcome of change i.
func (a *autoscaler) settle(ctx workflow.Context, d *autoscale.Decision, i int, f workflow.Future) error {
	c := &d.Changes[i]
	var out activities.RescaleOutcome
	err := f.Get(ctx, &out)
	switch {
	case temporal.IsCanceledError(err):
		return err
	case err != nil:
		c.Outcome, c.OutcomeDetail = autoscale.OutcomeFailed, err.Error()
	case out.Rejected != "":
		c.Outcome, c.OutcomeDetail = autoscale.OutcomeRejected, out.Rejected
	case out.Failed != "":
		c.Outcome, c.OutcomeDetail, c.WorkflowID = autoscale.OutcomeFailed, out.Failed, out.WorkflowID
	default:
		c.Outcome, c.OutcomeDetail, c.WorkflowID = autoscale.OutcomeDone, fmt.Sprintf("in %.1fs", out.Seconds), out.WorkflowID
		a.carry.Changes++
	}
	c.Ended = out.Ended
	a.carry.Guards = a.carry.Guards.Applied(*d, *c)
	return nil
}

// details is the markdown the Temporal UI shows as the autoscaler's
// current details: its last decisions.
func (a *autoscaler) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Autoscaling %s** (DS2 at utilization %g)\n", a.in.JobWorkflowID, a.pol.TargetUtilization)
	for _, d := range a.carry.Log {
		fmt.Fprintf(&b, "- %s\n", d.Line())
	}
	return b.String()
}

// AutoscaleSpec is the "reconfigure" update's argument for change c.
func AutoscaleSpec(c autoscale.Change) ReconfigSpec {
	typ := plan.KindScaleUp
	if c.To < c.From {
		typ = plan.KindScaleDown
	}
	return ReconfigSpec{Type: typ, TargetOperator: c.Operator, TargetParallelism: c.To}
}

// AutoscaleOutcome turns what a "reconfigure" update returned into the
// autoscaler's RescaleOutcome: a rejection (the validator refused it), a
// failure (the reconfiguration failed) or the reconfiguration done.
// ended is when the update completed.
func AutoscaleOutcome(res ReconfigureUpdateResult, rejected, failed error, ended time.Time) activities.RescaleOutcome {
	out := activities.RescaleOutcome{Parallelism: res.Parallelism, Ended: ended}
	if rejected != nil {
		out.Rejected = rejected.Error()
		return out
	}
	if failed != nil {
		out.Failed = failed.Error()
	}
	for _, o := range res.Outcomes {
		out.WorkflowID = o.WorkflowID
	}
	return out
}

// IsReconfigureRejection tells whether err, returned for a "reconfigure"
// update sent to the RunExperiment with workflow id jobWorkflowID, is the
// update's validator refusing it (nothing ran) rather than a failed
// reconfiguration: every rejection's message starts with "reconfigure job
// <job id>: " (validateRequest), no reconfiguration's error does.
func IsReconfigureRejection(jobWorkflowID string, err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		msg = appErr.Message()
	}
	return strings.HasPrefix(msg, "reconfigure job "+JobIDFor(jobWorkflowID)+": ")
}
