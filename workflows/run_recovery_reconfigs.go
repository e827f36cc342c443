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
const versionReconfigsAfterRecovery = "reconfigs-after-recovery"

// resumeAfterRecovery restarts the scheduler on ctx (the recovered run's
// context) with the recovered deployment and surviving workers.
func (s *reconfigScheduler) resumeAfterRecovery(ctx workflow.Context, dep control.Deployment, workers []control.WorkerInfo) {
	var again []ReconfigSpec
	var requested []bool // a request stays one when submitted again (rejectedPlan)
	for ticket := 1; ticket <= s.tickets; ticket++ {
		if id, ok := s.launched[ticket]; ok {
			if err, ended := s.done[id]; ended && err == nil {
				continue // completed before the loss
			}
		}
		again = append(again, s.specs[ticket])
		requested = append(requested, s.requested[ticket])
	}
	s.gen++
	s.ctx, s.dep, s.workers = ctx, dep, workers
	s.err, s.closed, s.timeline, s.pending = nil, false, false, 0
	s.running, s.queues = map[string]string{}, map[string][]queuedSpec{}
	if s.swapped != nil {
		s.swapped = map[string]control.Deployment{}
	}
	for i, spec := range again {
		if appliedIn(dep, spec) {
			workflow.GetLogger(ctx).Info("reconfiguration interrupted by a recovery is already in the recovered deployment; not run again", "operator", spec.TargetOperator, "type", spec.Type)
			continue
		}
		if tk := s.submit(spec); requested[i] {
			s.requested[tk] = true
		}
	}
	s.runTimelineFrom(s.timelineNext)
}

// appliedIn reports whether dep already has spec's effect.
func appliedIn(dep control.Deployment, spec ReconfigSpec) bool {
	switch spec.Type {
	case plan.KindRebalance, plan.KindTaskMigration:
		return false // re-planned from the measured load / placement
	}
	return len(dep.TasksOf(spec.TargetOperator)) == spec.TargetParallelism
}
