package wftest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"koala/activities"
	"koala/workflows"
	"koala/workflows/autoscale"
)

// EnvJobs is the autoscaler's activities.JobControl for a RunExperiment
// that runs in a test environment (env) instead of on a Temporal server:
// it answers JobState with the workflow's own "job-state" query and
// Rescale with its own "reconfigure" update (validator, scheduler and
// reconfiguration child included). Both run on env's event loop, where
// the test environment runs queries and updates, through
// env.RegisterDelayedCallback with no delay.
//
// Close Done once env.ExecuteWorkflow returned: the job has ended then.
type EnvJobs struct {
	Env  *testsuite.TestWorkflowEnvironment
	Done chan struct{}
	// started is closed when the workflow ran its first activity: its
	// handlers are registered then (RunExperiment registers them first).
	started     chan struct{}
	startedOnce sync.Once
}

var _ activities.JobControl = (*EnvJobs)(nil)

// NewEnvJobs returns the JobControl of the workflow env runs; it takes
// env's activity-started listener.
func NewEnvJobs(env *testsuite.TestWorkflowEnvironment) *EnvJobs {
	j := &EnvJobs{Env: env, Done: make(chan struct{}), started: make(chan struct{})}
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) {
		j.startedOnce.Do(func() { close(j.started) })
	})
	return j
}

var errEnvDone = errors.New("the experiment's workflow has completed")

// onLoop runs fn on env's event loop and waits for it.
func (j *EnvJobs) onLoop(ctx context.Context, fn func()) error {
	select {
	case <-j.Done:
		return errEnvDone
	default:
	}
	ran := make(chan struct{})
	j.Env.RegisterDelayedCallback(func() { fn(); close(ran) }, 0)
	select {
	case <-ran:
		return nil
	case <-j.Done:
		return errEnvDone
	case <-ctx.Done():
		return ctx.Err()
	}
}

// JobState implements activities.JobControl.
func (j *EnvJobs) JobState(ctx context.Context, workflowID string) (autoscale.JobState, error) {
	var st autoscale.JobState
	select {
	case <-j.started:
	default:
		return autoscale.JobState{JobID: workflows.JobIDFor(workflowID), WorkflowID: workflowID, Status: autoscale.StatusDeploying, Detail: "its workflow has not started"}, nil
	}
	var qerr error
	err := j.onLoop(ctx, func() {
		v, err := j.Env.QueryWorkflow(workflows.QueryJobState)
		if err == nil {
			err = v.Get(&st)
		}
		qerr = err
	})
	if errors.Is(err, errEnvDone) {
		return autoscale.JobState{JobID: workflows.JobIDFor(workflowID), WorkflowID: workflowID, Status: autoscale.StatusEnded, Detail: "its workflow is Completed"}, nil
	}
	if err != nil {
		return st, err
	}
	if qerr != nil {
		return st, fmt.Errorf("query job-state of %s: %w", workflowID, qerr)
	}
	return st, nil
}

// Rescale implements activities.JobControl.
func (j *EnvJobs) Rescale(ctx context.Context, workflowID, updateID string, c autoscale.Change) (activities.RescaleOutcome, error) {
	type result struct {
		rejected, err error
		res           workflows.ReconfigureUpdateResult
	}
	done := make(chan result, 1)
	err := j.onLoop(ctx, func() {
		j.Env.UpdateWorkflow(workflows.UpdateReconfigure, updateID, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { done <- result{rejected: err} },
			OnComplete: func(v any, err error) {
				r := result{err: err}
				if res, ok := v.(workflows.ReconfigureUpdateResult); ok {
					r.res = res
				}
				done <- r
			},
		}, workflows.AutoscaleSpec(c))
	})
	if err != nil {
		return activities.RescaleOutcome{}, fmt.Errorf("reconfigure update %s: %w", updateID, err)
	}
	select {
	case r := <-done:
		return workflows.AutoscaleOutcome(r.res, r.rejected, r.err, time.Now()), nil
	case <-j.Done:
		return activities.RescaleOutcome{}, fmt.Errorf("reconfigure update %s: %w", updateID, errEnvDone)
	case <-ctx.Done():
		return activities.RescaleOutcome{}, ctx.Err()
	}
}
