package activities

import (
	"context"
	"fmt"
	"slices"

	"koala/dataplane/control"
)

// SwapInput switches the upstreams of an operator to the new routing.
type SwapInput struct {
	Deployment     control.Deployment `json:"deployment"`      // new
	Previous       control.Deployment `json:"previous"`        // old: where the old owners live
	TargetOperator string             `json:"target_operator"` // the reconfigured operator
	OldOwners      []string           `json:"old_owners"`
	TimeoutSecs    float64            `json:"timeout_secs"`
	Step           StepInfo           `json:"step"`
	// Workers are every worker of the job's run. They learn the new routing
	// too, even those without a task in Deployment: a reconfiguration of
	// another operator running at the same time may be placing tasks there
	// from a deployment planned before this one.
	Workers []string `json:"workers,omitempty"`
}

// SwapRoutes switches every task that routes into the target operator to
// the new routing and waits until each old owner knows that no record
// routed the old way can still reach it.
//
//  1. Every worker learns the new deployment: its tasks install the
//     operator's new routing between two batches (per operator epochs, so
//     routing another reconfiguration installed meanwhile stays), and tasks
//     it creates from now on start with it.
//  2. The upstream tasks running now are asked, on their own goroutines, to
//     send a route barrier to the old owners after their current batch;
//     the barrier lists all of them. The list is read from the workers, not
//     from Deployment, because a concurrent reconfiguration of an upstream
//     operator may have added tasks the deployment does not know: any of
//     them that routed with the old table is running by now, and any
//     created later routes with the new one.
//  3. Each old owner aligns the barrier over the listed senders and
//     reports forwarding done; a retry also reads the barriers aligned so
//     far from the old owners' status.
func (a *Activities) SwapRoutes(ctx context.Context, in SwapInput) error {
	return a.step(ctx, in.Step, func() error {
		dep := in.Deployment
		spec, ok := dep.Job.Operator(in.TargetOperator)
		if !ok {
			return fmt.Errorf("swap routes: operator %q not in job", in.TargetOperator)
		}
		targets, err := oldOwnerRefs(in)
		if err != nil {
			return err
		}
		want := map[string]bool{}
		for _, id := range in.OldOwners {
			want[id] = true
		}
		// One barrier id per step: a protocol that swaps routes several times
		// in one reconfiguration (DRRS subscales) must not align stale barriers.
		barrier := in.Step.ReconfigID + "/" + in.Step.Step
		return a.awaitProgress(ctx, dep.Job.JobID, in.TimeoutSecs, want,
			func(ev control.MigrationProgress) string {
				if ev.Event == control.EventForwardingDone && ev.ReconfigID == barrier {
					return ev.TaskID
				}
				return ""
			},
			func() error {
				hosting := unionWorkers(dep.Workers(), in.Previous.Workers())
				if err := a.broadcastRouting(ctx, dep, hosting, in.Workers, in.Step.ReconfigID); err != nil {
					return err
				}
				order, groups, err := a.liveTasksOf(ctx, dep.Job.JobID, unionWorkers(hosting, in.Workers), hosting, spec.Inputs)
				if err != nil {
					return err
				}
				var senders []string
				for _, wid := range order {
					senders = append(senders, groups[wid]...)
				}
				for _, wid := range order {
					req := control.RoutingRequest{
						Deployment: dep, TaskIDs: groups[wid], InBand: true, BarrierID: barrier, BarrierOperator: in.TargetOperator,
						BarrierTargets: targets, BarrierSenders: senders,
					}
					if err := a.request(ctx, wid, control.VerbRouting, dep.Job.JobID, in.Step.ReconfigID, req, nil); err != nil {
						return err
					}
				}
				return nil
			},
			// A retry after a controller crash may have missed the events;
			// old owners also report the route barriers they aligned.
			func(done func(string)) error {
				st, err := a.taskStatus(ctx, in.Previous, in.OldOwners)
				if err != nil {
					return err
				}
				for _, s := range st {
					if slices.Contains(s.RouteBarriers, barrier) {
						done(s.TaskID)
					}
				}
				return nil
			})
	})
}

// oldOwnerRefs places the old owners, which get the route barrier.
func oldOwnerRefs(in SwapInput) ([]control.TaskRef, error) {
	prev := in.Previous
	if len(prev.Tasks) == 0 {
		prev = in.Deployment
	}
	out := make([]control.TaskRef, 0, len(in.OldOwners))
	for _, id := range in.OldOwners {
		i := slices.IndexFunc(prev.Tasks, func(t control.TaskRef) bool { return t.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("swap routes: old owner %q is not in the previous deployment", id)
		}
		out = append(out, prev.Tasks[i])
	}
	return out, nil
}

// broadcastRouting sends dep, out of band, to the workers hosting the job
// (which must answer) and to the other workers of the run (best effort: a
// worker without tasks of the job that is gone cannot host any).
func (a *Activities) broadcastRouting(ctx context.Context, dep control.Deployment, hosting, others []string, reconfigID string) error {
	req := control.RoutingRequest{Deployment: dep}
	for _, wid := range unionWorkers(hosting, others) {
		err := a.request(ctx, wid, control.VerbRouting, dep.Job.JobID, reconfigID, req, nil)
		if err != nil && slices.Contains(hosting, wid) {
			return err
		}
	}
	return nil
}

// liveTasksOf asks the workers which started, healthy tasks of the job's
// operators ops they run, grouped by worker (workers in order). Workers of
// hosting must answer; the others are asked on a best-effort basis.
func (a *Activities) liveTasksOf(ctx context.Context, jobID string, workers, hosting, ops []string) ([]string, map[string][]string, error) {
	var order []string
	groups := map[string][]string{}
	for _, wid := range workers {
		var st control.StatusReply
		if err := a.request(ctx, wid, control.VerbStatus, jobID, "", control.TasksRequest{}, &st); err != nil {
			if slices.Contains(hosting, wid) {
				return nil, nil, err
			}
			continue
		}
		for _, s := range st.Tasks {
			if !slices.Contains(ops, s.Operator) || !s.Running {
				continue
			}
			if _, ok := groups[wid]; !ok {
				order = append(order, wid)
			}
			groups[wid] = append(groups[wid], s.TaskID)
		}
	}
	return order, groups, nil
}

// unionWorkers lists the distinct ids of a and then b, sorted.
func unionWorkers(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, id := range b {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
