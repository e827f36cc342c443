package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"koala/dataplane/control"
)

// Rebalance moves hot buckets of operator op from its most loaded task to
// its least loaded one, keeping the parallelism and the placement of every
// task. bucketLoad[b] is the (measured or expected) load of bucket b, e.g.
// records per second; it needs NumBuckets non-negative finite entries.
//
// The planner is greedy and deterministic. A task either gives buckets or
// receives them, never both (as in Scale): the protocols install the new
// deployment on a gaining task before the old owners hand over, and a task
// that already runs the new deployment takes a handoff for a retry that
// was already applied. While a step helps, take the most loaded task H
// that has not received (ties: lowest index) and the least loaded task L
// that has not given (ties: lowest index), and move the bucket of H whose
// load l is closest to (load(H)-load(L))/2 among those with
// 0 < l < load(H)-load(L) (ties: lowest bucket), as long as H keeps at
// least one bucket. Every such step strictly lowers the sum of squared task
// loads, so the loop ends; it also stops after NumBuckets steps. A bucket moved twice shows up once,
// from its old owner to its final one. The routing epoch of op and
// Deployment.Epoch increase by one; the plan has no added or removed tasks.
//
// An operator whose spread no move can improve is an error (nothing to do),
// like scaling to the current parallelism.
func Rebalance(old control.Deployment, op string, bucketLoad []float64, workers []control.WorkerInfo) (Plan, error) {
	_ = workers // placement does not change; kept for the planner signature
	if err := Validate(old); err != nil {
		return Plan{}, fmt.Errorf("current deployment: %w", err)
	}
	spec, err := reconfigurableOperator(old, op)
	if err != nil {
		return Plan{}, err
	}
	n := old.Job.NumBuckets
	if len(bucketLoad) != n {
		return Plan{}, fmt.Errorf("rebalance of operator %q: bucket load has %d entries, job has NumBuckets %d", op, len(bucketLoad), n)
	}
	for b, l := range bucketLoad {
		if l < 0 || math.IsNaN(l) || math.IsInf(l, 0) {
			return Plan{}, fmt.Errorf("rebalance of operator %q: load %v of bucket %d must be a finite number ≥ 0", op, l, b)
		}
	}
	p := spec.Parallelism
	if p < 2 {
		return Plan{}, fmt.Errorf("rebalance of operator %q: it has a single task, there is nothing to rebalance", op)
	}
	table, _ := old.Table(op)
	buckets := slices.Clone(table.Buckets)
	load := TaskLoads(buckets, p, bucketLoad)
	owned := make([]int, p)
	for _, t := range buckets {
		owned[t]++
	}
	gave, got := make([]bool, p), make([]bool, p)
	for step := 0; step < n; step++ {
		hi, lo := -1, -1
		for t := 0; t < p; t++ {
			if !got[t] && (hi < 0 || load[t] > load[hi]) {
				hi = t
			}
			if !gave[t] && (lo < 0 || load[t] < load[lo]) {
				lo = t
			}
		}
		if hi < 0 || lo < 0 || hi == lo || owned[hi] < 2 {
			break
		}
		gap := load[hi] - load[lo]
		if gap <= 0 {
			break
		}
		best, bestDist := -1, 0.0
		for b, t := range buckets {
			l := bucketLoad[b]
			if t != hi || l <= 0 || l >= gap {
				continue
			}
			if d := math.Abs(l - gap/2); best < 0 || d < bestDist {
				best, bestDist = b, d
			}
		}
		if best < 0 {
			break
		}
		buckets[best] = lo
		gave[hi], got[lo] = true, true
		load[hi] -= bucketLoad[best]
		load[lo] += bucketLoad[best]
		owned[hi]--
		owned[lo]++
	}
	if slices.Equal(buckets, table.Buckets) {
		mx, mn := spreadOf(load)
		return Plan{}, fmt.Errorf("rebalance of operator %q: no bucket move lowers the spread (task loads max %.4g, min %.4g)", op, mx, mn)
	}
	return withTable(old, op, p, buckets, nil), nil
}

// TaskLoads sums bucketLoad per task index of a routing table over p tasks.
func TaskLoads(buckets []int, p int, bucketLoad []float64) []float64 {
	load := make([]float64, p)
	for b, t := range buckets {
		if t >= 0 && t < p && b < len(bucketLoad) {
			load[t] += bucketLoad[b]
		}
	}
	return load
}

// LoadSpread is max/min of the task loads of operator op in d under
// bucketLoad (+Inf when a task has no load and another has some).
func LoadSpread(d control.Deployment, op string, bucketLoad []float64) float64 {
	spec, ok := d.Job.Operator(op)
	table, okT := d.Table(op)
	if !ok || !okT {
		return math.NaN()
	}
	mx, mn := spreadOf(TaskLoads(table.Buckets, spec.Parallelism, bucketLoad))
	if mn == 0 {
		if mx == 0 {
			return 1
		}
		return math.Inf(1)
	}
	return mx / mn
}

func spreadOf(load []float64) (mx, mn float64) {
	if len(load) == 0 {
		return 0, 0
	}
	mx, mn = load[0], load[0]
	for _, l := range load[1:] {
		mx, mn = max(mx, l), min(mn, l)
	}
	return mx, mn
}

// reconfigurableOperator returns the spec of op, rejecting unknown
// operators and sources (their parallelism follows Kafka partitions).
func reconfigurableOperator(d control.Deployment, op string) (control.OperatorSpec, error) {
	spec, ok := d.Job.Operator(op)
	if !ok {
		return spec, fmt.Errorf("operator %q not found (operators: %s)", op, operatorNames(d.Job))
	}
	if strings.HasSuffix(spec.Kind, "source") {
		return spec, fmt.Errorf("operator %q is a source (kind %q): sources read Kafka partitions; moving their work is not supported", op, spec.Kind)
	}
	return spec, nil
}

// withTable builds the plan that gives operator op parallelism p and the
// routing table buckets: tasks of op with index ≥ p are removed, added
// (with the next indices, in order) are placed, the routing epoch of op and
// Deployment.Epoch increase by one, and Moves/MovesByPair are the diff of
// the old and new tables.
func withTable(old control.Deployment, op string, p int, buckets []int, added []control.TaskRef) Plan {
	plan := Plan{Operator: op, Old: cloneDeployment(old)}
	nd := cloneDeployment(old)
	for i := range nd.Job.Operators {
		if nd.Job.Operators[i].Name == op {
			nd.Job.Operators[i].Parallelism = p
		}
	}
	oldTable, _ := old.Table(op)
	for i := range nd.Routing {
		if nd.Routing[i].Operator == op {
			nd.Routing[i].Epoch++
			nd.Routing[i].Buckets = slices.Clone(buckets)
		}
	}
	nd.Epoch++
	kept := nd.Tasks[:0:0]
	for _, t := range nd.Tasks {
		if t.Operator == op && t.Index >= p {
			plan.RemovedTasks = append(plan.RemovedTasks, t)
			continue
		}
		kept = append(kept, t)
	}
	plan.AddedTasks = slices.Clone(added)
	kept = append(kept, added...)
	nd.Tasks = sortTasks(nd.Job, kept)
	var moves []move
	for b, t := range buckets {
		if from := oldTable.Buckets[b]; from != t {
			moves = append(moves, move{bucket: b, from: from, to: t})
			plan.Moves = append(plan.Moves, BucketMove{Bucket: b, From: control.TaskID(op, from), To: control.TaskID(op, t)})
		}
	}
	plan.MovesByPair = groupMoves(op, moves)
	plan.New = nd
	return plan
}
