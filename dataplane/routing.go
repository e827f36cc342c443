package dataplane

import (
	"github.com/cespare/xxhash/v2"

	"koala/dataplane/control"
)

// BucketOf maps a key to one of n buckets. Every component that partitions
// by key (routing, state layout, migration) must use this one function.
func BucketOf(key []byte, n int) int {
	if n <= 1 {
		return 0
	}
	return int(xxhash.Sum64(key) % uint64(n))
}

// route is a task's compiled view of one downstream operator: where each
// bucket goes and which tasks exist.
type route struct {
	op      control.OperatorSpec
	table   control.RoutingTable
	tasks   []control.TaskRef // by index
	buckets int
}

// target picks the downstream task for r. Keyed operators route by bucket;
// the others receive from a fixed task (forward), so per-channel order holds.
func (rt *route) target(r *Record, fromIndex int) control.TaskRef {
	if rt.op.Keyed && len(rt.table.Buckets) > 0 {
		idx := rt.table.Buckets[BucketOf(r.Key, rt.buckets)]
		if idx < len(rt.tasks) {
			return rt.tasks[idx]
		}
	}
	return rt.tasks[fromIndex%len(rt.tasks)]
}

// compileRoutes builds the routes of every downstream operator of op.
func compileRoutes(dep control.Deployment, op string) []*route {
	var out []*route
	for _, down := range dep.Job.Downstreams(op) {
		spec, _ := dep.Job.Operator(down)
		table, _ := dep.Table(down)
		tasks := dep.TasksOf(down)
		if len(tasks) == 0 {
			continue
		}
		byIndex := make([]control.TaskRef, 0, len(tasks))
		for i, t := range tasks {
			if t.Index != i {
				// Indices must be dense; the planner guarantees it.
				break
			}
			byIndex = append(byIndex, t)
		}
		out = append(out, &route{op: spec, table: table, tasks: byIndex, buckets: dep.Job.NumBuckets})
	}
	return out
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
