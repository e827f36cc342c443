// Package plan computes job placements and reconfiguration plans as pure
// functions from an old deployment to a new one.
//
// Everything here is deterministic: no I/O, no clock, no randomness and no
// iteration over maps where the order shows in the result, so workflow code
// may call these functions directly and replay gives the same answer.
//
// Conventions shared with the data plane (package control):
//
//   - Deployment.Tasks is ordered by operator (job order) and then by task index.
//   - Task index i of operator op has id control.TaskID(op, i); indices of an
//     operator are always 0..Parallelism-1.
//   - Every operator, keyed or not, has a routing table of Job.NumBuckets
//     entries mapping bucket → task index.
//   - WorkerInfo.Slots is advisory: placement spreads load but does not refuse
//     to put more tasks on a worker than it has slots.
package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"koala/dataplane/control"
)

// MaxNumBuckets bounds Job.NumBuckets (routing tables are sent in every
// routing update, so they must stay small).
const MaxNumBuckets = 65536

// Initial task placement (the job parameter ParamTaskPlacement).
//
// Round robin spreads a job's tasks over its workers, so consecutive
// operators of a chain usually sit on different workers and every record
// crosses the gRPC exchange (encode, syscalls, decode) at each hop.
// Co-locating puts task i of every operator on worker i mod n: a chain of
// operators with equal parallelism then runs on one worker per index and
// its records pass between tasks in memory (Worker.deliver), the way
// stream processors chain operators. Only the first deployment is placed
// this way; reconfigurations place the tasks they add as always.
const (
	PlacementRoundRobin = "round-robin"
	PlacementColocate   = "co-locate"
)

// TaskPlacements are the values ParamTaskPlacement accepts ("" is round robin).
var TaskPlacements = []string{PlacementRoundRobin, PlacementColocate}

// Initial builds the first deployment of job: for each operator in job order,
// Parallelism tasks placed round-robin over workers (sorted by ID), continuing
// the round-robin across operators so load spreads; with ParamTaskPlacement
// "co-locate", task i of every operator on worker i mod n. Every operator gets a
// routing table at epoch 1 whose buckets are spread contiguously and evenly
// (bucket b → task b*p/NumBuckets); Deployment.Epoch is 1.
func Initial(job control.JobSpec, workers []control.WorkerInfo) (control.Deployment, error) {
	if err := ValidateJob(job); err != nil {
		return control.Deployment{}, err
	}
	ws, err := sortedWorkers(workers)
	if err != nil {
		return control.Deployment{}, err
	}
	if len(ws) == 0 {
		return control.Deployment{}, fmt.Errorf("no workers available to place job %q", job.JobID)
	}
	d := control.Deployment{Job: cloneJob(job), Epoch: 1}
	colocate := job.Params[control.ParamTaskPlacement] == PlacementColocate
	next := 0
	for _, op := range job.Operators {
		for i := 0; i < op.Parallelism; i++ {
			w := ws[next%len(ws)]
			if colocate {
				w = ws[i%len(ws)]
			}
			next++
			d.Tasks = append(d.Tasks, control.TaskRef{
				ID:       control.TaskID(op.Name, i),
				Operator: op.Name,
				Index:    i,
				WorkerID: w.ID,
				DataAddr: w.DataAddr,
			})
		}
		d.Routing = append(d.Routing, control.RoutingTable{
			Operator: op.Name,
			Epoch:    1,
			Buckets:  EvenBuckets(job.NumBuckets, op.Parallelism),
		})
	}
	return d, nil
}

// EvenBuckets is the contiguous, even routing of n buckets over p tasks:
// bucket b goes to task b*p/n.
func EvenBuckets(n, p int) []int {
	out := make([]int, n)
	for b := range out {
		out[b] = b * p / n
	}
	return out
}

// BucketMove moves one bucket between two tasks (task ids).
type BucketMove struct {
	Bucket int    `json:"bucket"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// PairMoves groups the buckets one task hands to another.
type PairMoves struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Buckets []int  `json:"buckets"` // ascending
}

// Plan is one reconfiguration of one operator.
type Plan struct {
	Operator     string             `json:"operator"`
	Old          control.Deployment `json:"old"`
	New          control.Deployment `json:"new"`
	AddedTasks   []control.TaskRef  `json:"added_tasks,omitempty"`   // by index
	RemovedTasks []control.TaskRef  `json:"removed_tasks,omitempty"` // by index
	// Moves lists every bucket that changes owner, sorted by bucket.
	Moves []BucketMove `json:"moves,omitempty"`
	// MovesByPair groups Moves by (From, To), ordered by the task indices of
	// From and then To; used by DRRS subscales and the lazy handoff.
	MovesByPair []PairMoves `json:"moves_by_pair,omitempty"`
}

// MovedBuckets is the number of buckets that change owner.
func (p Plan) MovedBuckets() int { return len(p.Moves) }

// Scale changes operator op to parallelism p (scale-out or scale-in).
//
// New tasks get the next indices; scale-in removes the highest indices. Bucket
// movement is minimal: the target is an even spread (every task owns
// floor(NumBuckets/p) or that plus one bucket, the larger quotas going to the
// tasks that already own the most), a task keeps its lowest-numbered buckets
// up to its quota, and the buckets of removed tasks plus the surplus of
// overloaded tasks go to underloaded tasks in task-index order, lowest bucket
// numbers first. New tasks are placed one by one on the least-loaded worker
// of workers (fewest tasks of this job; ties by worker id). The routing epoch
// of op and Deployment.Epoch increase by one.
func Scale(old control.Deployment, op string, p int, workers []control.WorkerInfo) (Plan, error) {
	if err := Validate(old); err != nil {
		return Plan{}, fmt.Errorf("current deployment: %w", err)
	}
	spec, ok := old.Job.Operator(op)
	if !ok {
		return Plan{}, fmt.Errorf("operator %q not found (operators: %s)", op, operatorNames(old.Job))
	}
	if strings.HasSuffix(spec.Kind, "source") {
		return Plan{}, fmt.Errorf("operator %q is a source (kind %q): sources read Kafka partitions and scale with the partition count; rescaling a source is not supported", op, spec.Kind)
	}
	n := old.Job.NumBuckets
	if p < 1 || p > n {
		return Plan{}, fmt.Errorf("target parallelism %d for operator %q: must be between 1 and NumBuckets (%d)", p, op, n)
	}
	cur := spec.Parallelism
	if p == cur {
		return Plan{}, fmt.Errorf("operator %q already has parallelism %d", op, p)
	}
	var ws []control.WorkerInfo
	if p > cur {
		var err error
		if ws, err = sortedWorkers(workers); err != nil {
			return Plan{}, err
		}
		if len(ws) == 0 {
			return Plan{}, fmt.Errorf("no workers available to place %d new task(s) of operator %q", p-cur, op)
		}
	}

	table, _ := old.Table(op)
	newBuckets, moves := rebalance(table.Buckets, cur, p)

	plan := Plan{Operator: op, Old: cloneDeployment(old)}
	nd := cloneDeployment(old)
	for i := range nd.Job.Operators {
		if nd.Job.Operators[i].Name == op {
			nd.Job.Operators[i].Parallelism = p
		}
	}
	for i := range nd.Routing {
		if nd.Routing[i].Operator == op {
			nd.Routing[i].Epoch++
			nd.Routing[i].Buckets = newBuckets
		}
	}
	nd.Epoch++

	// Tasks: drop removed ones, place added ones.
	kept := nd.Tasks[:0:0]
	for _, t := range nd.Tasks {
		if t.Operator == op && t.Index >= p {
			plan.RemovedTasks = append(plan.RemovedTasks, t)
			continue
		}
		kept = append(kept, t)
	}
	if p > cur {
		load := make(map[string]int, len(ws))
		for _, t := range kept {
			load[t.WorkerID]++
		}
		for i := cur; i < p; i++ {
			best := ws[0]
			for _, w := range ws[1:] {
				if load[w.ID] < load[best.ID] { // ws is sorted by id, so ties keep the lower id
					best = w
				}
			}
			load[best.ID]++
			t := control.TaskRef{ID: control.TaskID(op, i), Operator: op, Index: i, WorkerID: best.ID, DataAddr: best.DataAddr}
			plan.AddedTasks = append(plan.AddedTasks, t)
			kept = append(kept, t)
		}
	}
	nd.Tasks = sortTasks(nd.Job, kept)
	slices.SortFunc(plan.RemovedTasks, func(a, b control.TaskRef) int { return cmp.Compare(a.Index, b.Index) })

	for _, m := range moves {
		plan.Moves = append(plan.Moves, BucketMove{Bucket: m.bucket, From: control.TaskID(op, m.from), To: control.TaskID(op, m.to)})
	}
	plan.MovesByPair = groupMoves(op, moves)
	plan.New = nd
	return plan, nil
}

type move struct{ bucket, from, to int }

// rebalance computes the minimal-movement even spread of buckets (owners in
// 0..cur-1) over p tasks. moves is sorted by bucket.
func rebalance(buckets []int, cur, p int) ([]int, []move) {
	n := len(buckets)
	owned := make([][]int, max(cur, p)) // ascending bucket lists per task index
	for b, t := range buckets {
		owned[t] = append(owned[t], b)
	}
	// Quotas: n/p each; the n%p extra buckets go to the tasks that own the
	// most already (ties: lower index), which minimises movement.
	order := make([]int, p)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(owned[b]), len(owned[a])) })
	quota := make([]int, p)
	for rank, t := range order {
		quota[t] = n / p
		if rank < n%p {
			quota[t]++
		}
	}
	out := slices.Clone(buckets)
	var pool []int // freed buckets
	for t := range owned {
		keep := len(owned[t])
		if t < p {
			keep = min(keep, quota[t])
		} else {
			keep = 0
		}
		pool = append(pool, owned[t][keep:]...)
	}
	slices.Sort(pool)
	next := 0
	for t := 0; t < p; t++ {
		for deficit := quota[t] - len(owned[t]); deficit > 0; deficit-- {
			out[pool[next]] = t
			next++
		}
	}
	moves := make([]move, 0, len(pool))
	for _, b := range pool {
		moves = append(moves, move{bucket: b, from: buckets[b], to: out[b]})
	}
	return out, moves
}

func groupMoves(op string, moves []move) []PairMoves {
	type pair struct{ from, to int }
	var pairs []pair
	byPair := map[pair][]int{}
	for _, m := range moves {
		k := pair{m.from, m.to}
		if _, ok := byPair[k]; !ok {
			pairs = append(pairs, k)
		}
		byPair[k] = append(byPair[k], m.bucket) // moves are sorted by bucket
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
	})
	out := make([]PairMoves, 0, len(pairs))
	for _, k := range pairs {
		out = append(out, PairMoves{From: control.TaskID(op, k.from), To: control.TaskID(op, k.to), Buckets: byPair[k]})
	}
	return out
}

// ValidateJob checks the parts of a job spec placement relies on: at least
// one bucket, at least one operator, unique non-empty operator names,
// parallelism between 1 and NumBuckets, and inputs naming earlier operators.
func ValidateJob(job control.JobSpec) error {
	if job.NumBuckets < 1 || job.NumBuckets > MaxNumBuckets {
		return fmt.Errorf("job %q: NumBuckets %d: must be between 1 and %d", job.JobID, job.NumBuckets, MaxNumBuckets)
	}
	if len(job.Operators) == 0 {
		return fmt.Errorf("job %q has no operators", job.JobID)
	}
	if v := job.Params[control.ParamTaskPlacement]; v != "" && !slices.Contains(TaskPlacements, v) {
		return fmt.Errorf("job %q: param %s %q: allowed %s", job.JobID, control.ParamTaskPlacement, v, strings.Join(TaskPlacements, ", "))
	}
	seen := map[string]bool{}
	for i, op := range job.Operators {
		if op.Name == "" {
			return fmt.Errorf("job %q: operator %d has no name", job.JobID, i)
		}
		if seen[op.Name] {
			return fmt.Errorf("job %q: operator name %q is used twice", job.JobID, op.Name)
		}
		if op.Parallelism < 1 || op.Parallelism > job.NumBuckets {
			return fmt.Errorf("job %q: parallelism %d for operator %q: must be between 1 and NumBuckets (%d)", job.JobID, op.Parallelism, op.Name, job.NumBuckets)
		}
		for _, in := range op.Inputs {
			if !seen[in] {
				if _, later := job.Operator(in); later {
					return fmt.Errorf("job %q: operator %q reads from %q, which is not an earlier operator (operators must be listed upstream first)", job.JobID, op.Name, in)
				}
				return fmt.Errorf("job %q: operator %q reads from unknown operator %q (operators: %s)", job.JobID, op.Name, in, operatorNames(job))
			}
		}
		seen[op.Name] = true
	}
	return nil
}

// Validate checks a deployment: a valid job, exactly the tasks 0..p-1 of
// every operator (with the expected ids, on named workers, ordered by
// operator and index), and one routing table per operator of NumBuckets
// entries that point at existing tasks.
func Validate(d control.Deployment) error {
	if err := ValidateJob(d.Job); err != nil {
		return err
	}
	pos := map[string]int{}
	for i, op := range d.Job.Operators {
		pos[op.Name] = i
	}
	count := make([]int, len(d.Job.Operators))
	for i, t := range d.Tasks {
		k, ok := pos[t.Operator]
		if !ok {
			return fmt.Errorf("task %q belongs to unknown operator %q", t.ID, t.Operator)
		}
		if t.Index != count[k] {
			return fmt.Errorf("task %q of operator %q: index %d out of order (expected %d; tasks must be ordered by operator and index 0..p-1)", t.ID, t.Operator, t.Index, count[k])
		}
		if want := control.TaskID(t.Operator, t.Index); t.ID != want {
			return fmt.Errorf("task %q: id should be %q", t.ID, want)
		}
		if t.WorkerID == "" {
			return fmt.Errorf("task %q is not placed on a worker", t.ID)
		}
		if i > 0 && pos[d.Tasks[i-1].Operator] > k {
			return fmt.Errorf("task %q: tasks must be ordered by operator in job order", t.ID)
		}
		count[k]++
	}
	for k, op := range d.Job.Operators {
		if count[k] != op.Parallelism {
			return fmt.Errorf("operator %q has %d task(s) but parallelism %d", op.Name, count[k], op.Parallelism)
		}
		rt, ok := d.Table(op.Name)
		if !ok {
			return fmt.Errorf("operator %q has no routing table", op.Name)
		}
		if len(rt.Buckets) != d.Job.NumBuckets {
			return fmt.Errorf("routing table of operator %q has %d buckets, job has NumBuckets %d", op.Name, len(rt.Buckets), d.Job.NumBuckets)
		}
		for b, t := range rt.Buckets {
			if t < 0 || t >= op.Parallelism {
				return fmt.Errorf("routing table of operator %q: bucket %d → task %d, but tasks are 0..%d", op.Name, b, t, op.Parallelism-1)
			}
		}
	}
	if len(d.Routing) != len(d.Job.Operators) {
		return fmt.Errorf("deployment has %d routing tables for %d operators", len(d.Routing), len(d.Job.Operators))
	}
	return nil
}

// sortedWorkers returns a copy of workers sorted by id, rejecting empty and
// duplicate ids.
func sortedWorkers(workers []control.WorkerInfo) ([]control.WorkerInfo, error) {
	ws := slices.Clone(workers)
	slices.SortFunc(ws, func(a, b control.WorkerInfo) int { return cmp.Compare(a.ID, b.ID) })
	for i, w := range ws {
		if w.ID == "" {
			return nil, fmt.Errorf("worker with data address %q has an empty id", w.DataAddr)
		}
		if i > 0 && ws[i-1].ID == w.ID {
			return nil, fmt.Errorf("worker id %q is listed twice", w.ID)
		}
	}
	return ws, nil
}

func sortTasks(job control.JobSpec, tasks []control.TaskRef) []control.TaskRef {
	pos := map[string]int{}
	for i, op := range job.Operators {
		pos[op.Name] = i
	}
	slices.SortStableFunc(tasks, func(a, b control.TaskRef) int {
		return cmp.Or(cmp.Compare(pos[a.Operator], pos[b.Operator]), cmp.Compare(a.Index, b.Index))
	})
	return tasks
}

func operatorNames(job control.JobSpec) string {
	names := make([]string, len(job.Operators))
	for i, op := range job.Operators {
		names[i] = op.Name
	}
	return strings.Join(names, ", ")
}

// cloneJob deep-copies a job spec so plans never alias their inputs.
func cloneJob(j control.JobSpec) control.JobSpec {
	j.Operators = slices.Clone(j.Operators)
	for i := range j.Operators {
		j.Operators[i].Inputs = slices.Clone(j.Operators[i].Inputs)
	}
	j.KafkaBrokers = slices.Clone(j.KafkaBrokers)
	j.Params = maps.Clone(j.Params)
	return j
}

func cloneDeployment(d control.Deployment) control.Deployment {
	d.Job = cloneJob(d.Job)
	d.Tasks = slices.Clone(d.Tasks)
	d.Routing = slices.Clone(d.Routing)
	for i := range d.Routing {
		d.Routing[i].Buckets = slices.Clone(d.Routing[i].Buckets)
	}
	return d
}
