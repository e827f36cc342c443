package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/plan"
)

// ReconfigureDRRS rescales a keyed operator DRRS-style: the migration is
// split into subscales (one per source → destination task pair, or
// job.Params["NumSubscales"] groups of neighbouring pairs) run one after
// another. The operator is never suspended: while subscale i runs, records
// of keys not yet moved keep flowing to their old owners, and records of
// the subscale in flight are forwarded by their old owner to the new one.
//
// Each subscale i steps the job from deployment D(i-1) to Di (see
// plan.Subscales; D0 is the running deployment): existing tasks that gain
// buckets install Di first (so they own what is forwarded to them), the
// old owners hand over their lookup entries and the new owners pull all the
// subscale's state at once (eager), upstreams swap to Di behind a route
// barrier, and the subscale ends when its new owners hold every moved key.
// Added tasks start with D1; removed tasks stop after the last subscale.
func ReconfigureDRRS(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	r := newStepRunner(ctx, in, ProtocolDRRS)

	var p plan.Plan
	if err := r.run("plan", a.PlanScale, planInput(in, r.info("plan")), &p); err != nil {
		return r.result(in.Current), err
	}
	n, err := plan.NumSubscales(in.Current.Job.Params)
	if err != nil {
		return r.result(in.Current), temporal.NewNonRetryableApplicationError(err.Error(), "BadConfig", err)
	}
	// Pure and deterministic, so computed in the workflow: the plan itself
	// is in the history as PlanScale's result.
	groups := plan.SubscaleGroups(p, n)
	deps, err := plan.Subscales(p, n)
	if err != nil {
		err = fmt.Errorf("reconfiguration %s: %w", in.ReconfigID, err)
		return r.result(in.Current), temporal.NewNonRetryableApplicationError(err.Error(), "InvalidReconfiguration", err)
	}
	final := deps[len(deps)-1]

	added := taskIDs(p.AddedTasks)
	if len(added) > 0 {
		if err := r.run("deploy-tasks", a.DeployTasks, activities.TasksInput{Deployment: deps[0], TaskIDs: added, Step: r.info("deploy-tasks")}, nil); err != nil {
			return r.result(in.Current), err
		}
		if err := r.run("start-tasks", a.StartTasks, activities.TasksInput{Deployment: deps[0], TaskIDs: added, Step: r.info("start-tasks")}, nil); err != nil {
			return r.result(in.Current), err
		}
	}
	stateful := isStateful(p)
	// Version 1 gates each subscale's new owners until the old owners have
	// forwarded (or, for an operator without keyed state, processed)
	// everything routed the old way, so no key's records are reordered;
	// histories from before keep their unordered handoffs.
	ordered := workflow.GetVersion(ctx, versionDRRSOrderedHandoff, workflow.DefaultVersion, 1) == 1
	prev := p.Old
	for i, grp := range groups {
		d := deps[i]
		name := fmt.Sprintf("subscale-%d/%d", i+1, len(groups))
		sources, dests := pairEnds(grp)
		// The subscale's state move runs from its eager fast-forward's
		// first request to its last new owner's "migrated" event (see
		// StateMove); the swap happens meanwhile.
		var handed activities.HandoffReport
		if stateful {
			// Tasks gaining buckets must own them before anything is
			// forwarded to them. Added tasks started with D1, so only the
			// first subscale can skip them.
			var gainers []string
			for _, id := range dests {
				if i > 0 || !slices.Contains(added, id) {
					gainers = append(gainers, id)
				}
			}
			if len(gainers) > 0 {
				step := name + "-prepare-owners"
				if err := r.run(step, a.UpdateRouting, activities.TasksInput{Deployment: d, TaskIDs: gainers, Step: r.info(step), OpenGates: ordered}, nil); err != nil {
					return r.result(prev), err
				}
			}
			step := name + "-fast-forward"
			if err := r.run(step, a.Handoff, activities.HandoffInput{
				Deployment: d, Previous: prev, Pairs: subscalePairs(grp), Eager: true, Ordered: ordered, TimeoutSecs: 300, Step: r.info(step), Operator: p.Operator,
			}, &handed); err != nil {
				return r.result(d), err
			}
		} else if ordered {
			step := name + "-fast-forward"
			if err := r.run(step, a.Handoff, activities.HandoffInput{
				Deployment: d, Previous: prev, Pairs: subscalePairs(grp), Ordered: true, TimeoutSecs: 300, Step: r.info(step), Operator: p.Operator,
			}, nil); err != nil {
				return r.result(d), err
			}
		}
		step := name + "-swap-routes"
		if err := r.run(step, a.SwapRoutes, activities.SwapInput{
			Deployment: d, Previous: prev, TargetOperator: p.Operator, OldOwners: sources, TimeoutSecs: 300, Step: r.info(step), Workers: workerIDs(in.Workers),
		}, nil); err != nil {
			return r.result(d), err
		}
		if stateful {
			step := name + "-await-migration"
			if err := r.awaitMigration(step, activities.AwaitMigrationInput{
				Deployment: d, Tasks: dests, TimeoutSecs: 3600, Step: r.info(step),
			}, handed.StartedAt); err != nil {
				return r.result(d), err
			}
		}
		prev = d
	}
	if removed := taskIDs(p.RemovedTasks); len(removed) > 0 {
		if err := r.run("stop-tasks", a.StopTasks, activities.TasksInput{Deployment: p.Old, TaskIDs: removed, Step: r.info("stop-tasks")}, nil); err != nil {
			return r.result(final), err
		}
	}
	return r.result(final), nil
}

// versionDRRSOrderedHandoff marks DRRS subscales whose handoffs keep
// per-key order (HandoffInput.Ordered).
const versionDRRSOrderedHandoff = "drrs-ordered-handoff"

// subscalePairs lists a subscale's (old owner, new owner) pairs.
func subscalePairs(grp []plan.PairMoves) []activities.OwnerPair {
	pairs := make([]activities.OwnerPair, 0, len(grp))
	for _, pm := range grp {
		pairs = append(pairs, activities.OwnerPair{From: pm.From, To: pm.To})
	}
	return pairs
}

// pairEnds lists the distinct sources and destinations of a subscale's
// pairs, in pair order.
func pairEnds(grp []plan.PairMoves) (sources, dests []string) {
	for _, pm := range grp {
		if !slices.Contains(sources, pm.From) {
			sources = append(sources, pm.From)
		}
		if !slices.Contains(dests, pm.To) {
			dests = append(dests, pm.To)
		}
	}
	return sources, dests
}
