package control

// Operator epochs. Every operator of a deployment has its own routing
// epoch (RoutingTable.Epoch), raised by each reconfiguration of that
// operator together with its task set and parallelism. Reconfigurations of
// different operators may run at the same time, each planned from the
// deployment it started with, so neither deployment they install is
// "newer" as a whole: each is newer for its own operator only. MergeNewer
// combines them operator by operator.

// OperatorEpoch is the routing epoch of op in d (0 when d has no table for it).
func (d Deployment) OperatorEpoch(op string) int64 {
	if t, ok := d.Table(op); ok {
		return t.Epoch
	}
	return 0
}

// MergeNewer returns cur with every operator for which next carries a
// higher routing epoch taken from next: the operator's spec (parallelism),
// routing table and tasks. Operators where next is not newer keep cur's
// state, so applying an old or repeated deployment changes nothing. The
// result's Epoch is the larger of the two; changed lists the operators
// taken from next, in job order. A cur without a job is replaced by next.
func MergeNewer(cur, next Deployment) (merged Deployment, changed []string) {
	if len(cur.Job.Operators) == 0 {
		for _, op := range next.Job.Operators {
			changed = append(changed, op.Name)
		}
		return next, changed
	}
	if next.Job.JobID != cur.Job.JobID {
		return cur, nil
	}
	fromNext := map[string]bool{}
	for _, op := range next.Job.Operators {
		if next.OperatorEpoch(op.Name) > cur.OperatorEpoch(op.Name) {
			fromNext[op.Name] = true
			changed = append(changed, op.Name)
		}
	}
	if len(changed) == 0 {
		if next.Epoch > cur.Epoch {
			cur.Epoch = next.Epoch
		}
		return cur, nil
	}
	merged = Deployment{Job: cur.Job, Epoch: max(cur.Epoch, next.Epoch)}
	merged.Job.Operators = append([]OperatorSpec(nil), cur.Job.Operators...)
	for i, op := range merged.Job.Operators {
		if fromNext[op.Name] {
			if spec, ok := next.Job.Operator(op.Name); ok {
				merged.Job.Operators[i] = spec
			}
		}
	}
	// Tasks stay ordered by operator (job order), then index.
	for _, op := range merged.Job.Operators {
		src := cur
		if fromNext[op.Name] {
			src = next
		}
		merged.Tasks = append(merged.Tasks, src.TasksOf(op.Name)...)
		if t, ok := src.Table(op.Name); ok {
			t.Buckets = append([]int(nil), t.Buckets...)
			merged.Routing = append(merged.Routing, t)
		}
	}
	return merged, changed
}
