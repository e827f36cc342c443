package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"koala/dataplane/control"
)

// Task migration moves the buckets of one task to a task on another worker.
//
// Why two steps. A task's id is control.TaskID(op, index), indices are
// dense (0..p-1: Validate, the data plane's routing and the source
// partition assignment rely on it), and the old and the new incarnation of
// a migrating task must coexist under different ids while the old one hands
// its state over (workers key tasks by job+task id, handoff and the key
// lookup tables name owners by task id). A single plan cannot do all three:
// a fresh id needs index p, and removing any index below p leaves a hole.
// So a migration of task i of an operator with parallelism p is two plans,
// each an ordinary one-operator Plan that every protocol executes unchanged:
//
//  1. evacuate: the last task p-1 is removed. Its buckets go to task i (so
//     i temporarily owns its own buckets B(i) and B(p-1)); when i is itself
//     the last task, its buckets are parked on the other task that owns the
//     fewest buckets (ties: lowest index). Parallelism becomes p-1. The plan
//     records the pending migration (task, target worker, B(i)) in the job
//     parameter ParamPendingMigration+op of the new deployment.
//  2. place: a new task with index p-1 (the freed id) is placed on the
//     target worker and takes exactly B(i) from whoever holds them;
//     parallelism is p again and the pending record is removed.
//
// Net effect: B(i) runs on the target worker under id op-(p-1). When i was
// p-1 nothing else changed (same id, same buckets, new worker); otherwise
// task i keeps running where it was with the buckets of the former last
// task. MigrateTask returns the next step for the deployment it is given,
// so the same request runs twice; MigrateTaskSteps returns both.
//
// Migrating the only task of an operator (p = 1) is refused: there is no
// task to park its buckets on. Scale it out first.

// PendingMigration is the value of ParamPendingMigration+op (JSON).
type PendingMigration struct {
	Task    string `json:"task"`
	Worker  string `json:"worker"`
	Buckets []int  `json:"buckets"`
}

// Pending returns the half-done migration of operator op in d, if any.
func Pending(d control.Deployment, op string) (PendingMigration, bool, error) {
	v, ok := d.Job.Params[control.ParamPendingMigration+op]
	if !ok {
		return PendingMigration{}, false, nil
	}
	var pm PendingMigration
	if err := json.Unmarshal([]byte(v), &pm); err != nil {
		return pm, true, fmt.Errorf("job parameter %s%s %q: %w", control.ParamPendingMigration, op, v, err)
	}
	return pm, true, nil
}

// MigrateTask returns the next step of migrating task taskID to worker
// toWorker (see the package comment on task migration above): the
// evacuate step on a deployment with no pending migration of the task's
// operator, the place step on one that has it pending.
func MigrateTask(old control.Deployment, taskID, toWorker string, workers []control.WorkerInfo) (Plan, error) {
	if err := Validate(old); err != nil {
		return Plan{}, fmt.Errorf("current deployment: %w", err)
	}
	ws, err := sortedWorkers(workers)
	if err != nil {
		return Plan{}, err
	}
	// A pending migration of this task: its operator is in the parameter
	// name (the task itself may be gone after step 1).
	for _, op := range old.Job.Operators {
		pm, ok, err := Pending(old, op.Name)
		if err != nil {
			return Plan{}, err
		}
		if ok && pm.Task == taskID {
			if pm.Worker != toWorker {
				return Plan{}, fmt.Errorf("task %q is half-way through a migration to worker %q; it cannot go to %q instead", taskID, pm.Worker, toWorker)
			}
			return placeStep(old, op.Name, pm, ws)
		}
	}
	var task control.TaskRef
	found := false
	for _, t := range old.Tasks {
		if t.ID == taskID {
			task, found = t, true
		}
	}
	if !found {
		ids := make([]string, 0, len(old.Tasks))
		for _, t := range old.Tasks {
			ids = append(ids, t.ID)
		}
		return Plan{}, fmt.Errorf("task %q not found (tasks: %s)", taskID, strings.Join(ids, ", "))
	}
	op := task.Operator
	spec, err := reconfigurableOperator(old, op)
	if err != nil {
		return Plan{}, err
	}
	if pm, ok, _ := Pending(old, op); ok {
		return Plan{}, fmt.Errorf("operator %q has a pending migration of task %q to worker %q; finish it before migrating %q", op, pm.Task, pm.Worker, taskID)
	}
	if _, ok := findWorker(ws, toWorker); !ok {
		return Plan{}, fmt.Errorf("target worker %q is unknown (workers: %s)", toWorker, workerIDs(ws))
	}
	if task.WorkerID == toWorker {
		return Plan{}, fmt.Errorf("task %q is already on worker %q", taskID, toWorker)
	}
	p := spec.Parallelism
	if p < 2 {
		return Plan{}, fmt.Errorf("task %q is the only task of operator %q: a migration parks its buckets on another task of the operator, so scale it out first", taskID, op)
	}
	table, _ := old.Table(op)
	buckets := slices.Clone(table.Buckets)
	var mine []int
	count := make([]int, p)
	for b, t := range buckets {
		count[t]++
		if t == task.Index {
			mine = append(mine, b)
		}
	}
	last := p - 1
	park := task.Index
	if park == last {
		park = -1
		for t := 0; t < last; t++ {
			if park < 0 || count[t] < count[park] {
				park = t
			}
		}
	}
	for b, t := range buckets {
		if t == last {
			buckets[b] = park
		}
	}
	pl := withTable(old, op, p-1, buckets, nil)
	val, err := json.Marshal(PendingMigration{Task: taskID, Worker: toWorker, Buckets: mine})
	if err != nil {
		return Plan{}, err
	}
	if pl.New.Job.Params == nil {
		pl.New.Job.Params = map[string]string{}
	}
	pl.New.Job.Params[control.ParamPendingMigration+op] = string(val)
	return pl, nil
}

// placeStep is step 2: a new last task on pm.Worker takes pm.Buckets.
func placeStep(old control.Deployment, op string, pm PendingMigration, ws []control.WorkerInfo) (Plan, error) {
	spec, err := reconfigurableOperator(old, op)
	if err != nil {
		return Plan{}, err
	}
	w, ok := findWorker(ws, pm.Worker)
	if !ok {
		return Plan{}, fmt.Errorf("migration of task %q: target worker %q is unknown (workers: %s)", pm.Task, pm.Worker, workerIDs(ws))
	}
	p := spec.Parallelism
	if p+1 > old.Job.NumBuckets {
		return Plan{}, fmt.Errorf("migration of task %q: parallelism %d of operator %q would exceed NumBuckets (%d)", pm.Task, p+1, op, old.Job.NumBuckets)
	}
	table, _ := old.Table(op)
	buckets := slices.Clone(table.Buckets)
	for _, b := range pm.Buckets {
		if b < 0 || b >= len(buckets) {
			return Plan{}, fmt.Errorf("migration of task %q: bucket %d out of range 0..%d", pm.Task, b, len(buckets)-1)
		}
		buckets[b] = p
	}
	t := control.TaskRef{ID: control.TaskID(op, p), Operator: op, Index: p, WorkerID: w.ID, DataAddr: w.DataAddr}
	pl := withTable(old, op, p+1, buckets, []control.TaskRef{t})
	delete(pl.New.Job.Params, control.ParamPendingMigration+op)
	return pl, nil
}

// MigrateTaskSteps plans both steps of a task migration from a deployment
// with none pending.
func MigrateTaskSteps(old control.Deployment, taskID, toWorker string, workers []control.WorkerInfo) ([]Plan, error) {
	first, err := MigrateTask(old, taskID, toWorker, workers)
	if err != nil {
		return nil, err
	}
	if _, pending, _ := Pending(first.New, first.Operator); !pending {
		return nil, fmt.Errorf("task %q: step 1 of its migration recorded nothing pending", taskID)
	}
	second, err := MigrateTask(first.New, taskID, toWorker, workers)
	if err != nil {
		return nil, err
	}
	return []Plan{first, second}, nil
}

func findWorker(ws []control.WorkerInfo, id string) (control.WorkerInfo, bool) {
	for _, w := range ws {
		if w.ID == id {
			return w, true
		}
	}
	return control.WorkerInfo{}, false
}

func workerIDs(ws []control.WorkerInfo) string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	return strings.Join(ids, ", ")
}
