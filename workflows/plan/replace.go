package plan

import (
	"fmt"
	"slices"

	"koala/dataplane/control"
)

// Replace re-places the tasks of d that ran on a lost worker onto the
// surviving workers, one by one on the survivor with the fewest tasks of
// the job (ties: lowest id); every other task keeps its worker. Task ids,
// indexes and routing stay: recovery loads each task's checkpointed part
// into a task of the same id. Data addresses are refreshed from workers.
func Replace(d control.Deployment, lost []string, workers []control.WorkerInfo) (control.Deployment, error) {
	ws, err := sortedWorkers(workers)
	if err != nil {
		return d, err
	}
	var alive []control.WorkerInfo
	for _, w := range ws {
		if !slices.Contains(lost, w.ID) {
			alive = append(alive, w)
		}
	}
	if len(alive) == 0 {
		return d, fmt.Errorf("no surviving worker to place the tasks of job %s on (lost: %v)", d.Job.JobID, lost)
	}
	nd := cloneDeployment(d)
	load := map[string]int{}
	addr := map[string]string{}
	for _, w := range alive {
		addr[w.ID] = w.DataAddr
	}
	for _, t := range nd.Tasks {
		if _, ok := addr[t.WorkerID]; ok {
			load[t.WorkerID]++
		}
	}
	for i := range nd.Tasks {
		t := &nd.Tasks[i]
		if a, ok := addr[t.WorkerID]; ok {
			t.DataAddr = a
			continue
		}
		if !slices.Contains(lost, t.WorkerID) {
			return d, fmt.Errorf("task %s is placed on worker %q, which is neither surviving nor lost", t.ID, t.WorkerID)
		}
		best := alive[0]
		for _, w := range alive[1:] {
			if load[w.ID] < load[best.ID] {
				best = w
			}
		}
		load[best.ID]++
		t.WorkerID, t.DataAddr = best.ID, best.DataAddr
	}
	if err := Validate(nd); err != nil {
		return d, fmt.Errorf("re-placed deployment: %w", err)
	}
	return nd, nil
}
