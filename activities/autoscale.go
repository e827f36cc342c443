package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/metrics"
	"koala/workflows/autoscale"
)

// The Autoscale workflow's side effects: reading the job's state and its
// metrics, sending it reconfigurations, recording decisions. Its
// activities are the methods of Autoscaler, registered next to
// Activities (a Temporal worker may register several activity structs).

// ErrTypeJobGone is the ApplicationError type of a job that does not
// exist (or never answered the job-state query): the autoscaler stops.
const ErrTypeJobGone = "JobGone"

// JobControl reaches the RunExperiment workflow that runs a job. In
// production it is a Temporal client (experiments/runner.TemporalJobs).
type JobControl interface {
	// JobState answers the job's "job-state" query; a closed workflow is
	// StatusEnded. A workflow that does not exist, is no RunExperiment or
	// does not answer the query is an error wrapping ErrJobGone.
	JobState(ctx context.Context, workflowID string) (autoscale.JobState, error)
	// Rescale sends the job's "reconfigure" update for c (updateID makes
	// a retried send the same update) and waits for its outcome.
	Rescale(ctx context.Context, workflowID, updateID string, c autoscale.Change) (RescaleOutcome, error)
}

// ErrJobGone is wrapped by a JobControl's error for a job the autoscaler
// cannot drive: its workflow does not exist, or is not a RunExperiment
// that answers the job-state query.
var ErrJobGone = errors.New("no job to autoscale")

// RescaleOutcome is what came of a reconfigure update.
type RescaleOutcome struct {
	// Rejected is the validator's reason when the job refused the request
	// (nothing ran); Failed the error of a reconfiguration that ran.
	Rejected string `json:"rejected,omitempty"`
	Failed   string `json:"failed,omitempty"`
	// WorkflowID of the reconfiguration, and the operator's parallelism afterwards.
	WorkflowID  string `json:"workflow_id,omitempty"`
	Parallelism int    `json:"parallelism,omitempty"`
	// Ended is when the update completed (the reconfiguration ended).
	Ended time.Time `json:"ended"`
	// Seconds from sending the update to its outcome (AutoscaleRescale
	// measures it).
	Seconds float64 `json:"seconds,omitempty"`
}

// TaskRowSource reads the per-task metric rows of a window: ClickHouse
// in production (metrics.ClickHouse), the in-process recorder in tests
// (metrics.Memory).
type TaskRowSource interface {
	TaskRows(ctx context.Context, job string, from, to time.Time) ([]metrics.TaskRow, error)
}

// DecisionLog stores decisions (metrics.AutoscaleLog).
type DecisionLog interface {
	Record(ctx context.Context, rows []metrics.AutoscaleRow) error
}

// Autoscaler holds the clients of the Autoscale workflow's activities.
type Autoscaler struct {
	Jobs    JobControl
	Metrics TaskRowSource // nil: no metrics, every tick is skipped
	// Decisions stores every decision; nil keeps them only in the
	// workflow's history (and its status query).
	Decisions DecisionLog
	Logger    *slog.Logger
	// PollInterval between two reads of a window that is not complete yet
	// (default 250 ms); MaxWait bounds the wait past the window's end
	// (default 10 s), after which the window is used as it is.
	PollInterval, MaxWait time.Duration
}

func (a *Autoscaler) logger() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

// AutoscaleJobState returns the state of the job run by workflowID.
func (a *Autoscaler) AutoscaleJobState(ctx context.Context, workflowID string) (autoscale.JobState, error) {
	if a.Jobs == nil {
		return autoscale.JobState{}, temporal.NewNonRetryableApplicationError("autoscaler: no job control configured (controller without a Temporal client)", "BadConfig", nil)
	}
	st, err := a.Jobs.JobState(ctx, workflowID)
	if errors.Is(err, ErrJobGone) {
		return st, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s (%s): %v", autoscale.FieldJob.Name, autoscale.FieldJob.Flag, err), ErrTypeJobGone, nil)
	}
	if err != nil {
		return st, fmt.Errorf("state of job %s: %w", workflowID, err)
	}
	return st, nil
}

// ObserveInput asks for the metrics of one tick.
type ObserveInput struct {
	JobID  string           `json:"job_id"`
	Policy autoscale.Policy `json:"policy"`
	// NotBefore is the earliest end of the window (zero: now).
	NotBefore time.Time `json:"not_before,omitempty"`
	// LastChange is when the job's latest reconfiguration ended: the
	// window starts after the stabilization that follows it.
	LastChange time.Time `json:"last_change,omitempty"`
}

// AutoscaleObserve returns every operator's load over the window that
// ends at the later of NotBefore and now (whole seconds) and starts
// WindowSeconds before, or at the end of the stabilization after
// LastChange. It waits, polling, until every task that reported in the
// window has reported its last second, at most MaxWait past the window's
// end; tasks still missing then are named in Observation.Incomplete.
func (a *Autoscaler) AutoscaleObserve(ctx context.Context, in ObserveInput) (autoscale.Observation, error) {
	if a.Metrics == nil {
		return autoscale.Observation{}, nil // Decide skips: no metric rows
	}
	to := time.Now().Truncate(time.Second)
	if in.NotBefore.After(to) {
		to = in.NotBefore.Truncate(time.Second)
	}
	from := in.Policy.WindowStart(to, in.LastChange)
	poll, maxWait := a.PollInterval, a.MaxWait
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	if maxWait <= 0 {
		maxWait = 10 * time.Second
	}
	deadline := to.Add(maxWait)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		now := time.Now()
		if !now.Before(to) {
			rows, err := a.Metrics.TaskRows(ctx, in.JobID, from, to.Add(maxWait))
			if err != nil {
				return autoscale.Observation{}, fmt.Errorf("metrics of job %s: %w", in.JobID, err)
			}
			missing := autoscale.Missing(rows, in.JobID, from, to)
			if len(missing) == 0 || now.After(deadline) {
				obs := autoscale.Aggregate(rows, in.JobID, from, to)
				obs.Incomplete = missing
				return obs, nil
			}
			heartbeat(ctx, fmt.Sprintf("waiting for the metrics of %d task(s) up to %s", len(missing), to.UTC().Format(time.TimeOnly)))
		} else {
			heartbeat(ctx, "waiting for the window's end at "+to.UTC().Format(time.TimeOnly))
		}
		select {
		case <-ctx.Done():
			return autoscale.Observation{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// RescaleInput is one change of a decision.
type RescaleInput struct {
	WorkflowID string           `json:"workflow_id"` // the job's RunExperiment
	UpdateID   string           `json:"update_id"`
	Change     autoscale.Change `json:"change"`
}

// AutoscaleRescale sends the change as the job's "reconfigure" update and
// waits, heartbeating, until the reconfiguration completed. A rejected
// request or a failed reconfiguration is an outcome, not an error.
func (a *Autoscaler) AutoscaleRescale(ctx context.Context, in RescaleInput) (RescaleOutcome, error) {
	if a.Jobs == nil {
		return RescaleOutcome{}, temporal.NewNonRetryableApplicationError("autoscaler: no job control configured", "BadConfig", nil)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				heartbeat(ctx, "waiting for "+in.Change.Summary)
			}
		}
	}()
	start := time.Now()
	out, err := a.Jobs.Rescale(ctx, in.WorkflowID, in.UpdateID, in.Change)
	out.Seconds = time.Since(start).Seconds()
	if errors.Is(err, ErrJobGone) {
		return out, temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeJobGone, nil)
	}
	if err != nil {
		return out, fmt.Errorf("reconfigure %s of job %s: %w", in.Change.Operator, in.WorkflowID, err)
	}
	a.logger().Info("autoscale", "job", in.WorkflowID, "change", in.Change.Summary, "rejected", out.Rejected, "failed", out.Failed, "reconfiguration", out.WorkflowID)
	return out, nil
}

// RecordInput is one decision to record.
type RecordInput struct {
	JobID      string             `json:"job_id"`
	Autoscaler string             `json:"autoscaler"`
	Decision   autoscale.Decision `json:"decision"`
}

// AutoscaleRecord stores a decision in the decision log (ClickHouse table
// autoscale_decisions), one row per operator.
func (a *Autoscaler) AutoscaleRecord(ctx context.Context, in RecordInput) error {
	a.logger().Info("autoscale decision", "job", in.JobID, "decision", in.Decision.Line())
	if a.Decisions == nil {
		return nil
	}
	if err := a.Decisions.Record(ctx, in.Decision.Rows(in.JobID, in.Autoscaler)); err != nil {
		return fmt.Errorf("record decision %d of job %s: %w", in.Decision.Seq, in.JobID, err)
	}
	return nil
}
