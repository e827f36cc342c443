package workflows

import (
	"go.temporal.io/sdk/workflow"

	"koala/dataplane/control"
	"koala/workflows/plan"
)

// Checkpoints during long migrations.
//
// Under eventual (background) migration a lazy reconfiguration's workflow
// waits for every value to move, which can take most of a run; skipping
// checkpoints for all of it leaves recovery with an old cut. Since the
// "checkpoints-mid-migration" version marker, a reconfiguration child
// signals RunExperiment once its routes are swapped (signalRoutesSwapped),
// and a checkpoint may start when every running reconfiguration has done
// so: it is taken of their new deployments merged in. From the swap on the
// deployment no longer changes (only removed tasks stop, and they are not
// in it), and the data plane refuses a part while a short step still
// touches the task (dataplane/checkpoint_barrier.go: route gates and
// drains, handoffs not yet installed, keys still on removed tasks), so
// such a checkpoint either captures every key once or fails and the next
// tick tries again. A reconfiguration still does not start while a
// checkpoint runs (reconfigScheduler.hold).

// versionCheckpointsMidMigration marks runs whose checkpoints may start
// while a reconfiguration migrates (runs with checkpoints only).
const versionCheckpointsMidMigration = "checkpoints-mid-migration"

// signalRoutesSwapped is sent by a reconfiguration child to its parent
// once upstreams route with its new deployment.
const signalRoutesSwapped = "routes-swapped"

// RoutesSwapped is the payload of signalRoutesSwapped.
type RoutesSwapped struct {
	ReconfigID string             `json:"reconfig_id"`
	Deployment control.Deployment `json:"deployment"`
}

// notifyRoutesSwapped tells the parent workflow, if any, that
// reconfigID's routes are swapped to dep. A failed signal only delays
// checkpoints until the reconfiguration ends, so it does not fail it.
func notifyRoutesSwapped(ctx workflow.Context, reconfigID string, dep control.Deployment) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if parent == nil {
		return
	}
	err := workflow.SignalExternalWorkflow(ctx, parent.ID, "", signalRoutesSwapped, RoutesSwapped{ReconfigID: reconfigID, Deployment: dep}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("routes-swapped signal to the parent failed; checkpoints wait for the end of the reconfiguration", "reconfig", reconfigID, "error", err)
	}
}

// trackRoutesSwapped makes the scheduler's children report their routing
// swap and records the reports of those still running.
func (s *reconfigScheduler) trackRoutesSwapped(ctx workflow.Context) {
	s.swapped = map[string]control.Deployment{}
	ch := workflow.GetSignalChannel(ctx, signalRoutesSwapped)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var msg RoutesSwapped
			if more := ch.Receive(ctx, &msg); !more {
				return
			}
			if _, ended := s.done[msg.ReconfigID]; !ended {
				s.swapped[msg.ReconfigID] = msg.Deployment
			}
		}
	})
}

// checkpointable returns the deployment to checkpoint and whether a
// checkpoint may start: every launched reconfiguration has ended or, when
// swaps are tracked, swapped its routes (the deployment then has their new
// deployments merged in, in launch order).
func (s *reconfigScheduler) checkpointable() (control.Deployment, bool) {
	dep := s.dep
	for _, o := range s.outcomes {
		if _, ended := s.done[o.ID]; ended {
			continue
		}
		next, ok := s.swapped[o.ID]
		if !ok {
			return s.dep, false
		}
		dep = plan.Merge(dep, next)
	}
	return dep, true
}
