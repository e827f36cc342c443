package plan

import (
	"fmt"
	"slices"
	"strconv"

	"koala/dataplane/control"
)

// NumSubscales reads ParamNumSubscales from job params: 0 when absent or
// empty, an error when it is not a non-negative integer.
func NumSubscales(params map[string]string) (int, error) {
	v, ok := params[control.ParamNumSubscales]
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want a non-negative integer (0 = one subscale per source→destination pair)", control.ParamNumSubscales, v)
	}
	return n, nil
}

// SubscaleGroups splits the moves of p into the pair groups of a DRRS-style
// reconfiguration, in execution order. By default (n <= 0, or n at least the
// number of pairs) every (source → destination) pair of p.MovesByPair is a
// subscale of its own; a smaller n merges neighbouring pairs in
// p.MovesByPair order into n groups whose sizes differ by at most one (the
// earlier groups take the extra pairs). A plan without moves has one empty
// subscale, so that the last deployment of Subscales is still p.New.
func SubscaleGroups(p Plan, n int) [][]PairMoves {
	m := len(p.MovesByPair)
	if m == 0 {
		return [][]PairMoves{nil}
	}
	if n <= 0 || n > m {
		n = m
	}
	out := make([][]PairMoves, 0, n)
	start := 0
	for g := range n {
		size := m / n
		if g < m%n {
			size++
		}
		grp := make([]PairMoves, 0, size)
		for _, pm := range p.MovesByPair[start : start+size] {
			pm.Buckets = slices.Clone(pm.Buckets)
			grp = append(grp, pm)
		}
		out = append(out, grp)
		start += size
	}
	return out
}

// Subscales returns the deployments D1..Dk a DRRS-style reconfiguration
// steps through, one per group of SubscaleGroups(p, n): Di routes the
// buckets of subscales 1..i to their new owners and every other bucket as
// p.Old does. Tasks added by p exist from D1 on and tasks removed by p stay
// listed (owning fewer and fewer buckets) until Dk, which is p.New with its
// epochs shifted: Di has Deployment.Epoch p.Old.Epoch+i and a routing table
// epoch for p.Operator of the old table's epoch plus i, so each step is
// newer than the last and every task installs it. Dk is the deployment to
// run on afterwards. Every Di passes Validate.
func Subscales(p Plan, n int) ([]control.Deployment, error) {
	if err := Validate(p.Old); err != nil {
		return nil, fmt.Errorf("subscales: old deployment: %w", err)
	}
	if err := Validate(p.New); err != nil {
		return nil, fmt.Errorf("subscales: new deployment: %w", err)
	}
	oldTable, ok := p.Old.Table(p.Operator)
	if !ok {
		return nil, fmt.Errorf("subscales: operator %q has no routing table in the old deployment", p.Operator)
	}
	newTable, _ := p.New.Table(p.Operator)

	// Every task of the operator in Old or New, by index (dense: one side
	// holds a prefix of the other's indices).
	union := slices.Clone(p.New.Tasks)
	for _, t := range p.Old.Tasks {
		if t.Operator == p.Operator && !slices.ContainsFunc(p.New.Tasks, func(u control.TaskRef) bool { return u.ID == t.ID }) {
			union = append(union, t)
		}
	}
	union = sortTasks(p.New.Job, union)
	index := map[string]int{}
	width := 0
	for _, t := range union {
		if t.Operator == p.Operator {
			index[t.ID] = t.Index
			width++
		}
	}

	groups := SubscaleGroups(p, n)
	k := len(groups)
	buckets := slices.Clone(oldTable.Buckets)
	moved := make([]bool, len(buckets))
	out := make([]control.Deployment, 0, k)
	for i, grp := range groups {
		for _, pm := range grp {
			from, okFrom := index[pm.From]
			to, okTo := index[pm.To]
			if !okFrom || !okTo {
				return nil, fmt.Errorf("subscales: pair %s→%s names a task that is not of operator %q", pm.From, pm.To, p.Operator)
			}
			for _, b := range pm.Buckets {
				if b < 0 || b >= len(buckets) {
					return nil, fmt.Errorf("subscales: pair %s→%s: bucket %d out of range 0..%d", pm.From, pm.To, b, len(buckets)-1)
				}
				if moved[b] {
					return nil, fmt.Errorf("subscales: bucket %d moves twice", b)
				}
				if buckets[b] != from {
					return nil, fmt.Errorf("subscales: pair %s→%s moves bucket %d, but the old owner is task %d", pm.From, pm.To, b, buckets[b])
				}
				moved[b] = true
				buckets[b] = to
			}
		}
		var d control.Deployment
		if i == k-1 {
			if !slices.Equal(buckets, newTable.Buckets) {
				return nil, fmt.Errorf("subscales: the moves of plan for %q do not lead from the old routing table to the new one", p.Operator)
			}
			d = cloneDeployment(p.New)
		} else {
			d = cloneDeployment(p.New)
			d.Tasks = slices.Clone(union)
			for j := range d.Job.Operators {
				if d.Job.Operators[j].Name == p.Operator {
					d.Job.Operators[j].Parallelism = width
				}
			}
		}
		d.Epoch = p.Old.Epoch + int64(i) + 1
		for j := range d.Routing {
			if d.Routing[j].Operator == p.Operator {
				d.Routing[j].Epoch = oldTable.Epoch + int64(i) + 1
				d.Routing[j].Buckets = slices.Clone(buckets)
			}
		}
		if err := Validate(d); err != nil {
			return nil, fmt.Errorf("subscales: deployment %d of %d: %w", i+1, k, err)
		}
		out = append(out, d)
	}
	return out, nil
}
