package workflows

import (
	"go.temporal.io/sdk/workflow"

	"koala/dataplane/control"
	"koala/workflows/plan"
)

// Reconfigurations and recoveries.
//
// A lost worker cancels the run's context, and with it every running
// reconfiguration child and the timeline of reconfigurations still to
// come. Since the "reconfigs-after-recovery" version marker, once the job
// is recovered (RecoverJob, run_checkpoints.go) the scheduler resumes on
// the recovered deployment:
//
//   - a reconfiguration that was running is re-planned from the recovered
//     deployment and run again under a new id (its cancelled child is
//     reported with its outcome as it was) — unless the recovered
//     deployment already has its effect (a scale whose operator has the
//     target parallelism: the checkpoint was taken after its routing swap),
//     then it is not run again;
//   - one that was queued behind another of its lane, or requested and not
//     yet started, is submitted again in ticket order;
//   - config-scheduled ones not yet submitted run at their trigger times,
//     as without the loss (a trigger time already past fires at once).
//
// Runs recorded before the marker stop reconfiguring after a recovery.
//
// Requests ("reconfigure" update): from the watch's report of a lost worker
// until the recovery is done, the validator refuses them (they would run
// on the job being torn down), saying to retry after recovery. Since the
// "request-rerun-after-recovery" marker, a request accepted before the loss
// and cut short by it — its child cancelled, or failed because the workers
// it waited on died — is answered with the outcome of its re-run (or at
// once, if the recovered deployment already has its effect), not with the
// interruption's error.
const versionReconfigsAfterRecovery = "reconfigs-after-recovery"

// resumeAfterRecovery restarts the scheduler on ctx (the recovered run's
// context) with the recovered deployment and surviving workers.
func (s *reconfigScheduler) resumeAfterRecovery(ctx workflow.Context, dep control.Deployment, workers []control.WorkerInfo) {
	var again []int // tickets to submit again
	for ticket := 1; ticket <= s.tickets; ticket++ {
		if id, ok := s.launched[ticket]; ok {
			if err, ended := s.done[id]; ended && err == nil {
				continue // completed before the loss
			}
		}
		again = append(again, ticket)
	}
	s.gen++
	s.ctx, s.dep, s.workers = ctx, dep, workers
	// Requests still waiting for their trigger time stay pending (only
	// counted in runs since "request-rerun-after-recovery").
	s.err, s.closed, s.timeline, s.pending = nil, false, false, s.waiting
	s.running, s.queues = map[string]string{}, map[string][]queuedSpec{}
	if s.swapped != nil {
		s.swapped = map[string]control.Deployment{}
	}
	for _, old := range again {
		spec := s.specs[old]
		if appliedIn(dep, spec) {
			workflow.GetLogger(ctx).Info("reconfiguration interrupted by a recovery is already in the recovered deployment; not run again", "operator", spec.TargetOperator, "type", spec.Type)
			s.rerunAs[old] = 0
			continue
		}
		tk := s.submit(spec)
		s.rerunAs[old] = tk // its request, if any, follows it (serveRequest)
		if s.requested[old] {
			s.requested[tk] = true // a request stays one when submitted again (rejectedPlan)
		}
	}
	s.runTimelineFrom(s.timelineNext)
}

// versionRequestRerunAfterRecovery marks runs in which a requested
// reconfiguration cut short by a worker loss — cancelled, or failed
// because the workers it waited on died — is followed to its re-run after
// the recovery and answered with that outcome. Before it, the request
// failed with the interruption's error while the recovery ran it again.
const versionRequestRerunAfterRecovery = "request-rerun-after-recovery"

// followRerun maps the tickets of a request across a recovery: one that
// completed before it stays, one submitted again becomes its new ticket,
// one whose effect the recovered deployment has is dropped.
func (s *reconfigScheduler) followRerun(tickets []int) []int {
	var out []int
	for _, tk := range tickets {
		if id, ok := s.launched[tk]; ok {
			if err, ended := s.done[id]; ended && err == nil {
				out = append(out, tk)
				continue
			}
		}
		if nt, ok := s.rerunAs[tk]; !ok {
			out = append(out, tk) // not interrupted (not expected: every ticket is mapped)
		} else if nt != 0 {
			out = append(out, nt)
		}
	}
	return out
}

// mayRecover tells whether the run may recover from a lost worker (it
// takes checkpoints) and has not given up doing so.
func (s *reconfigScheduler) mayRecover() bool {
	return s.lostWorker != nil && !s.abandoned
}

// appliedIn reports whether dep already has spec's effect.
func appliedIn(dep control.Deployment, spec ReconfigSpec) bool {
	switch spec.Type {
	case plan.KindRebalance, plan.KindTaskMigration:
		return false // re-planned from the measured load / placement
	}
	return len(dep.TasksOf(spec.TargetOperator)) == spec.TargetParallelism
}
