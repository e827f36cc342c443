package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"koala/dataplane/control"
	"koala/workflows/plan"
)

// UpdateReconfigure is the name of RunExperiment's update that reconfigures
// the running job on request. Its argument has the shape of one
// Reconfigurations[] entry (ReconfigSpec); TriggerTimeSeconds absent (0) or
// already past means now, a later one waits for that second of the run.
// The update completes when the reconfiguration has, with its outcome
// (two outcomes for a task migration, which takes two steps).
//
// A rebalance without bucket_load plans from the load measured on the
// running tasks (activities.PlanScale).
//
// The validator rejects, before anything is written to the history: a job
// that is not running yet, is being recovered from a lost worker ("the job
// is recovering …; retry after recovery") or whose input has ended, an
// unknown operator or type, a parallelism outside 1..NumBuckets or equal
// to the current one, a task migration to a worker the job does not use,
// and an operator whose
// reconfiguration is still running ("operator X is being reconfigured
// (workflow ID …)"; see reconfigScheduler for why requests are rejected
// where config-scheduled reconfigurations queue). A task migration without
// task_id or target_worker gets them chosen when it starts
// (task_migration_choice.go).
const UpdateReconfigure = "reconfigure"

// ReconfigureUpdateResult is what the "reconfigure" update returns.
type ReconfigureUpdateResult struct {
	Outcomes []ReconfigOutcome `json:"outcomes"`
	// Parallelism is the operator's parallelism afterwards.
	Parallelism int `json:"parallelism"`
}

// registerReconfigureUpdate installs the update handler on RunExperiment.
func (s *reconfigScheduler) registerReconfigureUpdate(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateReconfigure,
		func(ctx workflow.Context, spec ReconfigSpec) (ReconfigureUpdateResult, error) {
			return s.serveRequest(ctx, spec)
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, spec ReconfigSpec) error {
			return s.validateRequest(spec)
		}})
}

// serveRequest runs an accepted request: at its trigger time, one child
// (two for a task migration, queued in the operator's lane), and returns
// their outcomes once they completed. Since the
// "request-rerun-after-recovery" marker, a request cut short by a worker
// loss that the run recovers from is answered with the outcome of its
// re-run on the recovered job (run_recovery_reconfigs.go).
func (s *reconfigScheduler) serveRequest(ctx workflow.Context, spec ReconfigSpec) (ReconfigureUpdateResult, error) {
	var res ReconfigureUpdateResult
	rerun := workflow.GetVersion(ctx, versionRequestRerunAfterRecovery, workflow.DefaultVersion, 1) == 1
	steps := 1
	if spec.Type == plan.KindTaskMigration {
		steps = 2 // evacuate, then place (plan.MigrateTask)
	}
	waiting := 0
	if rerun {
		waiting = steps // pending across a recovery too
	}
	s.pending += steps // the run waits for a request accepted before its input ended
	s.waiting += waiting
	err := sleepUntil(ctx, s.start, spec.TriggerTimeSeconds)
	s.pending -= steps
	s.waiting -= waiting
	if err != nil {
		return res, err
	}
	var tickets []int
	for i := 0; i < steps; i++ {
		tk := s.submit(spec) // a second step queues behind the first: same lane
		s.requested[tk] = true
		tickets = append(tickets, tk)
	}
	ids, err := s.awaitRequest(ctx, tickets, rerun)
	if err != nil {
		return res, err
	}
	for _, o := range s.outcomes {
		if slices.Contains(ids, o.ID) {
			res.Outcomes = append(res.Outcomes, o)
		}
	}
	if spec, ok := s.dep.Job.Operator(spec.TargetOperator); ok {
		res.Parallelism = spec.Parallelism
	}
	return res, nil
}

// validateRequest checks a reconfiguration request against the running
// job without changing anything (Temporal runs it before accepting the
// update, and on replay not at all).
func (s *reconfigScheduler) validateRequest(spec ReconfigSpec) error {
	reject := func(format string, args ...any) error {
		return fmt.Errorf("reconfigure job %s: "+format, append([]any{s.jobID}, args...)...)
	}
	if !s.live {
		return reject("the job is not running yet (its tasks are being deployed); retry in a few seconds")
	}
	if s.lostWorker != nil && !s.abandoned {
		if w, ok := s.lostWorker(); ok {
			// Accepted now, it would run on the job being torn down.
			return reject("the job is recovering from the loss of worker %s (restarting from its last checkpoint); retry after recovery", w)
		}
	}
	switch {
	case s.closed && s.err == nil:
		return reject("the job's input has ended (TotalRuntimeSeconds=%d): no more reconfigurations", s.in.TotalRuntimeSeconds)
	case s.err != nil && s.mayRecover():
		return reject("the job is stopping after a failure (%v); if a lost worker caused it, the job is recovered from its last checkpoint: retry after recovery", s.err)
	case s.err != nil:
		return reject("a reconfiguration failed (%v): no more reconfigurations", s.err)
	}
	op := spec.TargetOperator
	if op == "" {
		return reject("target_operator is required (operators: %s)", operatorList(s.dep.Job))
	}
	if _, ok := s.dep.Job.Operator(op); !ok {
		return reject("operator %q not found (operators: %s)", op, operatorList(s.dep.Job))
	}
	if spec.TriggerTimeSeconds < 0 || spec.TriggerTimeSeconds >= s.in.TotalRuntimeSeconds {
		return reject("trigger_time_seconds %d must be in [0, TotalRuntimeSeconds=%d)", spec.TriggerTimeSeconds, s.in.TotalRuntimeSeconds)
	}
	if id, busy := s.running[s.lane(op)]; busy {
		if s.perOp {
			return reject("operator %s is being reconfigured (workflow ID %s); retry when it completed", op, id)
		}
		return reject("operator %s cannot be reconfigured now: the job is being reconfigured (workflow ID %s) and protocol %s reconfigures one operator at a time", op, id, protocolName(s.in.ReconfigProtocol))
	}
	n := s.dep.Job.NumBuckets
	var err error
	switch spec.Type {
	case "", plan.KindScaleUp, plan.KindScaleDown:
		if spec.TargetParallelism < 1 || spec.TargetParallelism > n {
			return reject("target_parallelism %d for operator %s: must be between 1 and NumBuckets (%d)", spec.TargetParallelism, op, n)
		}
		_, err = plan.Scale(s.dep, op, spec.TargetParallelism, s.workers)
	case plan.KindRebalance:
		// Without bucket_load the plan step measures the load of the tasks.
		if len(spec.BucketLoad) > 0 {
			if len(spec.BucketLoad) != n {
				return reject("rebalance of operator %s: bucket_load needs one entry per bucket (%d), got %d", op, n, len(spec.BucketLoad))
			}
			_, err = plan.Rebalance(s.dep, op, spec.BucketLoad, s.workers)
		} else if spec, _ := s.dep.Job.Operator(op); spec.Parallelism < 2 {
			return reject("rebalance of operator %s: it has a single task, there is nothing to rebalance", op)
		}
	case plan.KindTaskMigration:
		if needsChoice(spec) {
			// Chosen again when the migration starts (completeMigration);
			// this checks that a choice exists now.
			c, err := plan.ChooseMigration(s.dep, op, spec.TaskID, spec.TargetWorker, s.workers)
			if err != nil {
				return reject("task-migration of operator %s: %v", op, err)
			}
			spec.TaskID, spec.TargetWorker = c.TaskID, c.To
		}
		if !slices.ContainsFunc(s.workers, func(w control.WorkerInfo) bool { return w.ID == spec.TargetWorker }) {
			return reject("task-migration: worker %q is not one of the job's workers (%s)", spec.TargetWorker, strings.Join(workerIDs(s.workers), ", "))
		}
		if !slices.ContainsFunc(s.dep.TasksOf(op), func(t control.TaskRef) bool { return t.ID == spec.TaskID }) {
			return reject("task-migration: task %q is not a task of operator %s", spec.TaskID, op)
		}
		_, err = plan.MigrateTask(s.dep, spec.TaskID, spec.TargetWorker, s.workers)
	default:
		return reject("type %q is unknown (allowed: %s, %s, %s, %s)", spec.Type, plan.KindScaleUp, plan.KindScaleDown, plan.KindRebalance, plan.KindTaskMigration)
	}
	if err != nil {
		return reject("%v", err)
	}
	return nil
}

func operatorList(job control.JobSpec) string {
	names := make([]string, 0, len(job.Operators))
	for _, op := range job.Operators {
		names = append(names, op.Name)
	}
	return strings.Join(names, ", ")
}

func protocolName(p string) string {
	if p == "" {
		return ProtocolStopAndRestart
	}
	return p
}

// awaitRequest waits until each ticket's step started and completed, or
// the run failed, and returns their reconfiguration ids. With rerun, a
// failure while the run may still recover from a lost worker waits for the
// recovery and follows the steps it submitted again; otherwise it is the
// request's error.
func (s *reconfigScheduler) awaitRequest(ctx workflow.Context, tickets []int, rerun bool) ([]string, error) {
	for {
		gen := s.gen
		var ids []string
		if err := workflow.Await(ctx, func() bool {
			if rerun && s.gen != gen {
				return true // a recovery submitted the steps again
			}
			ids = ids[:0]
			for _, tk := range tickets {
				id, ok := s.launched[tk]
				if !ok {
					return s.err != nil
				}
				if _, ok := s.done[id]; !ok && s.err == nil {
					return false
				}
				ids = append(ids, id)
			}
			return true
		}); err != nil {
			return nil, err
		}
		if !rerun || s.gen == gen {
			failed := s.err
			for _, id := range ids {
				if err, ok := s.done[id]; ok && err != nil {
					failed = err
					break
				}
			}
			if failed == nil {
				return ids, nil
			}
			if !rerun || !s.mayRecover() {
				return nil, failed
			}
			// Cut short, maybe by a lost worker: the run either recovers
			// (and submits the steps again) or gives up.
			if err := workflow.Await(ctx, func() bool { return s.gen != gen || s.abandoned }); err != nil {
				return nil, err
			}
			if s.gen == gen {
				return nil, failed
			}
		}
		tickets = s.followRerun(tickets)
	}
}
