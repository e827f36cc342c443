package soak

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"koala/dataplane/control"
	"koala/workflows"
	"koala/workflows/autoscale"
	"koala/workflows/plan"
)

// updateWithin bounds one reconfiguration, from the update to its result,
// through faults (a controller or Temporal restart delays it).
const updateWithin = 4 * time.Minute

// reconfigure sends the scheduled reconfiguration to its job. The plan
// assumed every earlier one succeeded; the job's own state decides: a
// target equal to the operator's parallelism now is moved one step, a
// task index beyond it wraps.
func (d *driver) reconfigure(ctx context.Context, r Reconfig, jobs []string) (string, error) {
	id := jobs[slices.Index(Queries, r.Query)]
	par, err := d.parallelism(ctx, id)
	if err != nil {
		return "", fmt.Errorf("job state of %s: %w", id, err)
	}
	var specs []workflows.ReconfigSpec
	for _, t := range r.Targets {
		cur := par[t.Operator]
		if cur == 0 {
			return "", fmt.Errorf("job %s has no operator %s", id, t.Operator)
		}
		spec := workflows.ReconfigSpec{TargetOperator: t.Operator}
		kind := r.Kind
		if kind == Rebalance && cur == 1 {
			kind = ScaleOut // one task has nothing to rebalance
		}
		switch kind {
		case Rebalance:
			spec.Type = plan.KindRebalance
		case TaskMigration:
			spec.Type = plan.KindTaskMigration
			spec.TaskID = control.TaskID(t.Operator, r.Task%cur)
		default:
			target := t.Parallelism
			if kind == ScaleOut && target <= cur {
				target = cur + 1
			}
			if target == cur || target > MaxParallelism || target < MinParallelism {
				target = cur + 1
				if target > MaxParallelism {
					target = cur - 1
				}
			}
			spec.Type, spec.TargetParallelism = plan.KindScaleUp, target
			if target < cur {
				spec.Type = plan.KindScaleDown
			}
		}
		specs = append(specs, spec)
	}
	outs := make([]string, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = d.update(ctx, id, spec, par[spec.TargetOperator])
		}()
	}
	wg.Wait()
	return strings.Join(outs, "; "), errors.Join(errs...)
}

// parallelism reads the job's operators' parallelism now (its job-state
// query), waiting while the job still deploys.
func (d *driver) parallelism(ctx context.Context, id string) (map[string]int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		var st autoscale.JobState
		v, err := d.tc.QueryWorkflow(ctx, id, "", workflows.QueryJobState)
		if err == nil {
			err = v.Get(&st)
		}
		if err == nil && len(st.Operators) > 0 {
			out := map[string]int{}
			for _, op := range st.Operators {
				out[op.Name] = op.Parallelism
			}
			return out, nil
		}
		if err == nil {
			err = fmt.Errorf("no operators yet (%s %s)", st.Status, st.Detail)
		}
		if (!transient(err) && len(st.Operators) > 0) || time.Now().After(deadline) {
			return nil, err
		}
		if err := pause(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// update sends one reconfigure update and waits for its result. A
// transport error (Temporal restarting) is retried with the same update
// id, which Temporal deduplicates, so a retry waits for the same
// reconfiguration instead of starting another.
func (d *driver) update(ctx context.Context, id string, spec workflows.ReconfigSpec, from int) (string, error) {
	updID := d.nextUpdateID()
	what := spec.TargetOperator
	switch spec.Type {
	case plan.KindScaleUp, plan.KindScaleDown:
		what = fmt.Sprintf("%s %d→%d", spec.TargetOperator, from, spec.TargetParallelism)
	case plan.KindTaskMigration:
		what = fmt.Sprintf("%s %s", spec.Type, spec.TaskID)
	case plan.KindRebalance:
		what = fmt.Sprintf("%s %s", spec.Type, spec.TargetOperator)
	}
	uctx, cancel := context.WithTimeout(ctx, updateWithin)
	defer cancel()
	for {
		h, err := d.tc.UpdateWorkflow(uctx, client.UpdateWorkflowOptions{
			UpdateID: updID, WorkflowID: id, UpdateName: workflows.UpdateReconfigure, Args: []any{spec},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var res workflows.ReconfigureUpdateResult
		if err == nil {
			err = h.Get(uctx, &res)
		}
		if err == nil {
			took := 0.0
			for _, o := range res.Outcomes {
				took += o.EndSec - o.StartSec
			}
			return fmt.Sprintf("%s (%s %.1fs)", what, protocolOf(res), took), nil
		}
		// A rejection that says to retry (the operator's lane is busy,
		// or under stop-and-restart the job's: the second of two at once
		// then runs after the first; the job still deploys) is retried.
		rejected := !transient(err) && (strings.Contains(err.Error(), "retry") || strings.Contains(err.Error(), "cannot be reconfigured now"))
		if !(transient(err) || rejected) || uctx.Err() != nil {
			return what, fmt.Errorf("%s: %w", what, err)
		}
		if rejected {
			updID = d.nextUpdateID() // a rejected request is a new one next time
		}
		if d.ended(uctx, id) {
			return what, fmt.Errorf("%s: job %s ended: %w", what, id, err)
		}
		if err := pause(uctx, time.Second); err != nil {
			return what, fmt.Errorf("%s: %w", what, err)
		}
	}
}

func protocolOf(res workflows.ReconfigureUpdateResult) string {
	for _, o := range res.Outcomes {
		if o.Protocol != "" {
			return o.Protocol
		}
	}
	return "done"
}

// transient tells errors of an unreachable or restarting service, which
// a retry may get past, from answers.
func transient(err error) bool {
	var un *serviceerror.Unavailable
	var de *serviceerror.DeadlineExceeded
	var nf *serviceerror.NotFound
	if errors.As(err, &un) || errors.As(err, &de) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.As(err, &nf) {
		// A restarted dev server answers NotFound for workflows it has
		// not loaded yet only briefly; a missing job stays missing and
		// the caller's deadline ends the retries.
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "Unavailable", "transport is closing", "EOF", "no workers", "history service"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (d *driver) nextUpdateID() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.updSeq++
	return fmt.Sprintf("soak-%d-%d", d.cfg.Seed, d.updSeq)
}
