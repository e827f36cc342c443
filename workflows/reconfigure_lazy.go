package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows/plan"
)

// ReconfigureLazy rescales a keyed operator with the Koala protocol while
// the job keeps running: new tasks start with the new routing, old owners
// hand over their key lookup tables (one writer per key from then on),
// upstreams swap routes behind an in-flight barrier, and values follow
// lazily — fetched when a batch touches them, and in the background unless
// the mode is fetch-on-demand. Removed tasks stop once nothing points at them.
func ReconfigureLazy(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	r := newStepRunner(ctx, in, ProtocolLazy)

	var p plan.Plan
	if err := r.run("plan", a.PlanScale, planInput(in, r.info("plan")), &p); err != nil {
		return r.result(in.Current), err
	}
	if added := taskIDs(p.AddedTasks); len(added) > 0 {
		if err := r.run("deploy-tasks", a.DeployTasks, activities.TasksInput{Deployment: p.New, TaskIDs: added, Step: r.info("deploy-tasks")}, nil); err != nil {
			return r.result(in.Current), err
		}
		if err := r.run("start-tasks", a.StartTasks, activities.TasksInput{Deployment: p.New, TaskIDs: added, Step: r.info("start-tasks")}, nil); err != nil {
			return r.result(in.Current), err
		}
	}
	// An operator without keyed state has nothing to hand off or migrate:
	// swapping the upstreams' routes behind a route barrier is the whole
	// reconfiguration (as in ReconfigureDRRS).
	if !isStateful(p) && workflow.GetVersion(ctx, lazyStatelessVersion, workflow.DefaultVersion, 1) == 1 {
		return lazySwapOnly(r, in, p)
	}
	// Existing tasks that gain buckets must own them before anything is
	// forwarded to them.
	if gaining := existingGainers(p); len(gaining) > 0 {
		// Version 1: they also start holding back upstream watermarks
		// until their old owners drained (control.RoutingRequest.OpenGates).
		gates := workflow.GetVersion(r.ctx, versionGatesAtPrepare, workflow.DefaultVersion, 1) == 1
		if err := r.run("prepare-owners", a.UpdateRouting, activities.TasksInput{Deployment: p.New, TaskIDs: gaining, Step: r.info("prepare-owners"), OpenGates: gates}, nil); err != nil {
			return r.result(in.Current), err
		}
	}
	pairs := ownerPairs(p)
	if err := r.run("fast-forward", a.Handoff, activities.HandoffInput{
		Deployment: p.New, Previous: p.Old, Pairs: pairs, TimeoutSecs: 300, Step: r.info("fast-forward"), Operator: p.Operator,
	}, nil); err != nil {
		return r.result(p.New), err
	}
	if err := r.run("swap-routes", a.SwapRoutes, activities.SwapInput{
		Deployment: p.New, Previous: p.Old, TargetOperator: p.Operator, OldOwners: oldOwners(p), TimeoutSecs: 300, Step: r.info("swap-routes"), Workers: workerIDs(in.Workers),
	}, nil); err != nil {
		return r.result(p.New), err
	}
	if in.NotifyRoutesSwapped {
		notifyRoutesSwapped(ctx, in.ReconfigID, p.New) // checkpoints may start now (run_checkpoints_migration.go)
	}
	// Under fetch-on-demand a scale-out is done once routes are swapped;
	// keys of removed tasks are always pulled so those tasks can stop.
	if in.Current.Job.Params[control.ParamMigrationMode] != control.ModeFetchOnDemand || len(p.RemovedTasks) > 0 {
		// A lazy move has no start to time it from (values move while
		// records flow): its StateMove is the bytes migrated and this
		// step's own time.
		if err := r.awaitMigration("await-migration", activities.AwaitMigrationInput{
			Deployment: p.New, Tasks: gainingTasks(p), TimeoutSecs: 3600, Step: r.info("await-migration"),
		}, time.Time{}); err != nil {
			return r.result(p.New), err
		}
	}
	if removed := taskIDs(p.RemovedTasks); len(removed) > 0 {
		if err := r.run("finalize", a.StopTasks, activities.TasksInput{Deployment: p.Old, TaskIDs: removed, Step: r.info("finalize")}, nil); err != nil {
			return r.result(p.New), err
		}
	}
	return r.result(p.New), nil
}

// versionGatesAtPrepare guards opening the new owners' gates when they
// learn their new buckets (prepare-owners) rather than when each handoff ends.
const versionGatesAtPrepare = "gates-at-prepare-owners"

// versionStatelessOrdered guards the order-only handoff before a stateless
// operator's route swap (lazy and DRRS).
const versionStatelessOrdered = "stateless-ordered-handoff"

// lazyStatelessVersion guards the swap-only path of ReconfigureLazy for an
// operator without keyed state (before it, the handoff step failed on such
// operators).
const lazyStatelessVersion = "lazy-stateless-swap-only"

// lazySwapOnly finishes a lazy reconfiguration of an operator that keeps no
// keyed state: the upstreams switch routes behind a route barrier, and
// removed tasks stop once they have seen it from every upstream.
func lazySwapOnly(r *stepRunner, in ReconfigureInput, p plan.Plan) (ReconfigureResult, error) {
	// Version 1 keeps per-key order: before the swap, each old owner hands
	// its new owners the order alone (no state), so they hold records sent
	// straight to them until the old owner processed everything routed to
	// it the old way.
	if workflow.GetVersion(r.ctx, versionStatelessOrdered, workflow.DefaultVersion, 1) == 1 {
		if err := r.run("fast-forward", a.Handoff, activities.HandoffInput{
			Deployment: p.New, Previous: p.Old, Pairs: ownerPairs(p), Ordered: true, TimeoutSecs: 300, Step: r.info("fast-forward"), Operator: p.Operator,
		}, nil); err != nil {
			return r.result(p.New), err
		}
	}
	if err := r.run("swap-routes", a.SwapRoutes, activities.SwapInput{
		Deployment: p.New, Previous: p.Old, TargetOperator: p.Operator, OldOwners: oldOwners(p), TimeoutSecs: 300, Step: r.info("swap-routes"), Workers: workerIDs(in.Workers),
	}, nil); err != nil {
		return r.result(p.New), err
	}
	if removed := taskIDs(p.RemovedTasks); len(removed) > 0 {
		if err := r.run("finalize", a.StopTasks, activities.TasksInput{Deployment: p.Old, TaskIDs: removed, Step: r.info("finalize")}, nil); err != nil {
			return r.result(p.New), err
		}
	}
	return r.result(p.New), nil
}

// ownerPairs lists each (old owner, new owner) pair of the plan once.
func ownerPairs(p plan.Plan) []activities.OwnerPair {
	out := make([]activities.OwnerPair, 0, len(p.MovesByPair))
	for _, m := range p.MovesByPair {
		out = append(out, activities.OwnerPair{From: m.From, To: m.To})
	}
	return out
}

func oldOwners(p plan.Plan) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range p.MovesByPair {
		if !seen[m.From] {
			seen[m.From] = true
			out = append(out, m.From)
		}
	}
	return out
}

func gainingTasks(p plan.Plan) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range p.MovesByPair {
		if !seen[m.To] {
			seen[m.To] = true
			out = append(out, m.To)
		}
	}
	return out
}

// existingGainers are tasks that gain buckets and already ran before.
func existingGainers(p plan.Plan) []string {
	added := map[string]bool{}
	for _, t := range p.AddedTasks {
		added[t.ID] = true
	}
	var out []string
	for _, id := range gainingTasks(p) {
		if !added[id] {
			out = append(out, id)
		}
	}
	return out
}

func isStateful(p plan.Plan) bool {
	spec, ok := p.New.Job.Operator(p.Operator)
	return ok && spec.Stateful
}
