package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"koala/dataplane/control"
)

// Choosing what a task migration moves
//
// The artifact's task migration names only the operator: it moves the task
// of one hard-wired worker (its worker 9, the first task of the operator,
// on the host that also runs the extra sources and the sink) to a free
// worker. koala's MigrateTask needs the task and the target worker, so a
// request that leaves either out gets them chosen here, from the
// deployment as it stands when the migration starts:
//
//   - the task: one of the operator's tasks on the worker that holds the
//     most tasks of the job (any operator); of those, the highest index,
//     because moving the operator's last task is a plain move (MigrateTask
//     otherwise keeps the chosen task where it is with the last task's
//     buckets and gives the last task's id to the moved buckets);
//   - the worker: of the other workers, the one that holds the fewest
//     tasks.
//
// Ties go to the worker whose id sorts first. The choice is a pure
// function of its inputs, so workflow code may make it (replay makes the
// same one). A migration whose first step (evacuate) ran already is
// completed as recorded: its second step takes the pending task and
// worker, whatever the load is by then.

// MigrationChoice is the task a migration moves and the worker it goes to.
type MigrationChoice struct {
	Operator string
	TaskID   string
	// From is the worker the task runs on ("" for the second step: the
	// task may be gone then).
	From string
	To   string
	// Step is 1 (evacuate) or 2 (place; see MigrateTask).
	Step int
}

// String says what the migration step does, for summaries and logs.
func (c MigrationChoice) String() string {
	if c.Step == 2 {
		return fmt.Sprintf("task %s → worker %s (step 2/2: place)", c.TaskID, c.To)
	}
	return fmt.Sprintf("task %s: worker %s → worker %s (step 1/2: evacuate)", c.TaskID, c.From, c.To)
}

// ChooseMigration completes a task-migration request on d: op, taskID and
// toWorker are the request's TargetOperator, TaskID and TargetWorker, any
// of which may be "" (but not op and taskID both); workers are the job's
// task workers. Given fields are kept and checked.
func ChooseMigration(d control.Deployment, op, taskID, toWorker string, workers []control.WorkerInfo) (MigrationChoice, error) {
	ws, err := sortedWorkers(workers)
	if err != nil {
		return MigrationChoice{}, err
	}
	if op == "" && taskID == "" {
		return MigrationChoice{}, fmt.Errorf("task-migration needs TargetOperator (the task is then chosen) or TaskID")
	}
	if c, ok, err := pendingChoice(d, op, taskID, toWorker); ok || err != nil {
		return c, err
	}
	if toWorker != "" {
		if _, ok := findWorker(ws, toWorker); !ok {
			return MigrationChoice{}, fmt.Errorf("target worker %q is unknown (workers: %s)", toWorker, workerIDs(ws))
		}
	}
	load := map[string]int{}
	for _, t := range d.Tasks {
		load[t.WorkerID]++
	}
	var task control.TaskRef
	if taskID != "" {
		i := slices.IndexFunc(d.Tasks, func(t control.TaskRef) bool { return t.ID == taskID })
		if i < 0 {
			return MigrationChoice{}, fmt.Errorf("task %q not found (tasks: %s)", taskID, joinIDs(d.Tasks))
		}
		task = d.Tasks[i]
		if op != "" && task.Operator != op {
			return MigrationChoice{}, fmt.Errorf("task %q belongs to operator %q, not TargetOperator %q", taskID, task.Operator, op)
		}
	} else {
		if _, ok := d.Job.Operator(op); !ok {
			return MigrationChoice{}, fmt.Errorf("operator %q not found (operators: %s)", op, operatorNames(d.Job))
		}
		var found bool
		if task, found = busiestTask(d.TasksOf(op), load, toWorker); !found {
			return MigrationChoice{}, fmt.Errorf("operator %q has no task that is not on worker %q already", op, toWorker)
		}
	}
	if toWorker == "" {
		var found bool
		if toWorker, found = idlestWorker(ws, load, task.WorkerID); !found {
			return MigrationChoice{}, fmt.Errorf("task %q cannot move: worker %q is the job's only worker (workers: %s)", task.ID, task.WorkerID, workerIDs(ws))
		}
	}
	return MigrationChoice{Operator: task.Operator, TaskID: task.ID, From: task.WorkerID, To: toWorker, Step: 1}, nil
}

// pendingChoice is the second step of a migration whose first step ran:
// the pending migration of op (or of the operator whose pending task is
// taskID). ok is false when none is pending.
func pendingChoice(d control.Deployment, op, taskID, toWorker string) (MigrationChoice, bool, error) {
	for _, spec := range d.Job.Operators {
		if op != "" && spec.Name != op {
			continue
		}
		pm, ok, err := Pending(d, spec.Name)
		if err != nil {
			return MigrationChoice{}, true, err
		}
		if !ok || (op == "" && pm.Task != taskID) {
			continue
		}
		if taskID != "" && pm.Task != taskID {
			return MigrationChoice{}, true, fmt.Errorf("operator %q has a pending migration of task %q to worker %q; finish it before migrating %q", spec.Name, pm.Task, pm.Worker, taskID)
		}
		if toWorker != "" && pm.Worker != toWorker {
			return MigrationChoice{}, true, fmt.Errorf("task %q is half-way through a migration to worker %q; it cannot go to %q instead", pm.Task, pm.Worker, toWorker)
		}
		return MigrationChoice{Operator: spec.Name, TaskID: pm.Task, To: pm.Worker, Step: 2}, true, nil
	}
	return MigrationChoice{}, false, nil
}

// busiestTask picks, of tasks (one operator's), the highest-index task on
// the worker with the most tasks (load), skipping worker skip.
func busiestTask(tasks []control.TaskRef, load map[string]int, skip string) (control.TaskRef, bool) {
	var best control.TaskRef
	found := false
	for _, t := range tasks {
		if t.WorkerID == skip {
			continue
		}
		if !found {
			best, found = t, true
			continue
		}
		c := cmp.Or(
			cmp.Compare(load[t.WorkerID], load[best.WorkerID]), // more tasks first
			cmp.Compare(best.WorkerID, t.WorkerID),             // then the id that sorts first
			cmp.Compare(t.Index, best.Index),                   // then the highest index
		)
		if c > 0 {
			best = t
		}
	}
	return best, found
}

// idlestWorker picks, of ws (sorted by id), the worker with the fewest
// tasks (load) other than from.
func idlestWorker(ws []control.WorkerInfo, load map[string]int, from string) (string, bool) {
	best, found := "", false
	for _, w := range ws {
		if w.ID == from {
			continue
		}
		if !found || load[w.ID] < load[best] {
			best, found = w.ID, true
		}
	}
	return best, found
}

func joinIDs(tasks []control.TaskRef) string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return strings.Join(ids, ", ")
}
