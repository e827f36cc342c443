package dataplane

import (
	"koala/dataplane/control"
	"koala/statesvc"
)

// route is a task's compiled view of one downstream operator: where each
// bucket goes and which tasks exist.
type route struct {
	op      control.OperatorSpec
	table   control.RoutingTable
	tasks   []control.TaskRef // by index
	byID    map[string]control.TaskRef
	buckets int
}

// owner is the task that owns bucket b.
func (rt *route) owner(b int) control.TaskRef {
	if b < len(rt.table.Buckets) {
		if idx := rt.table.Buckets[b]; idx < len(rt.tasks) {
			return rt.tasks[idx]
		}
	}
	return rt.tasks[0]
}

// target picks the downstream task for r. Keyed operators route by bucket;
// the others receive from a fixed task (forward), so per-channel order holds.
func (rt *route) target(r *Record, fromIndex int) control.TaskRef {
	return *rt.targetRef(r, fromIndex)
}

// targetRef is target as a pointer into the route's tasks: the same task
// of the same route is the same pointer.
func (rt *route) targetRef(r *Record, fromIndex int) *control.TaskRef {
	if rt.op.Keyed && len(rt.table.Buckets) > 0 {
		idx := rt.table.Buckets[statesvc.BucketOf(r.Key, rt.buckets)]
		if idx < len(rt.tasks) {
			return &rt.tasks[idx]
		}
	}
	return &rt.tasks[fromIndex%len(rt.tasks)]
}

// compileRoutes builds the routes of every downstream operator of op.
func compileRoutes(dep control.Deployment, op string) []*route {
	var out []*route
	for _, down := range dep.Job.Downstreams(op) {
		if rt := compileRoute(dep, down); rt != nil {
			out = append(out, rt)
		}
	}
	return out
}

// compileRoute builds the route into operator op, or nil if it has no tasks.
func compileRoute(dep control.Deployment, op string) *route {
	spec, ok := dep.Job.Operator(op)
	if !ok {
		return nil
	}
	table, _ := dep.Table(op)
	tasks := dep.TasksOf(op)
	if len(tasks) == 0 {
		return nil
	}
	rt := &route{op: spec, table: table, byID: map[string]control.TaskRef{}, buckets: dep.Job.NumBuckets}
	for i, t := range tasks {
		if t.Index != i {
			break // indices are dense; the planner guarantees it
		}
		rt.tasks = append(rt.tasks, t)
		rt.byID[t.ID] = t
	}
	return rt
}

// upstreamsOf lists the task ids that feed op.
func upstreamsOf(dep control.Deployment, op string) []string {
	spec, ok := dep.Job.Operator(op)
	if !ok {
		return nil
	}
	var ids []string
	for _, in := range spec.Inputs {
		for _, t := range dep.TasksOf(in) {
			ids = append(ids, t.ID)
		}
	}
	return ids
}
