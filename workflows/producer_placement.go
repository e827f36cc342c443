package workflows

import (
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
)

// Producer placement. The input generators stand in for the artifact's
// producer machines (ProducerIPs): on the task workers they take CPU from
// the pipeline they feed, so a run can name ProducerWorkers that run the
// generators and host no task. Runs recorded before the
// "producer-workers" marker (and runs without ProducerWorkers) place
// producer i on task worker i mod n.
const versionProducerWorkers = "producer-workers"

// discoverWorkers finds the task workers and the workers the producers run
// on. With ProducerWorkers those are discovered by id (all of them must
// answer) and removed from the task workers; with an empty Workers list the
// task workers are all others that answer, at least MinWorkers of them.
func discoverWorkers(ctx, actx workflow.Context, in ExperimentInput) (tasks, producers []control.WorkerInfo, err error) {
	separate := len(in.ProducerWorkers) > 0 &&
		workflow.GetVersion(ctx, versionProducerWorkers, workflow.DefaultVersion, 1) >= 1
	want := activities.DiscoverInput{Want: in.Workers, Min: in.MinWorkers, Timeout: 20}
	if separate {
		if bad := slices.DeleteFunc(slices.Clone(in.ProducerWorkers), func(id string) bool { return !slices.Contains(in.Workers, id) }); len(bad) > 0 {
			msg := fmt.Sprintf("invalid experiment: ProducerWorkers %s are also in Workers (a producer worker hosts no task; allowed: worker ids not in Workers)", strings.Join(bad, ", "))
			return nil, nil, temporal.NewNonRetryableApplicationError(msg, "BadConfig", nil)
		}
		if len(in.Workers) == 0 {
			want.Min = max(in.MinWorkers, 1) + len(in.ProducerWorkers)
		}
	}
	if err := workflow.ExecuteActivity(actx, a.DiscoverWorkers, want).Get(ctx, &tasks); err != nil {
		return nil, nil, err
	}
	if !separate {
		return tasks, tasks, nil
	}
	if err := workflow.ExecuteActivity(actx, a.DiscoverWorkers, activities.DiscoverInput{
		Want: in.ProducerWorkers, Min: len(in.ProducerWorkers), Timeout: 20,
	}).Get(ctx, &producers); err != nil {
		return nil, nil, err
	}
	tasks = slices.DeleteFunc(tasks, func(w control.WorkerInfo) bool { return slices.Contains(in.ProducerWorkers, w.ID) })
	if len(tasks) < max(in.MinWorkers, 1) {
		msg := fmt.Sprintf("invalid experiment: %d worker(s) left for tasks besides ProducerWorkers %s, MinWorkers is %d",
			len(tasks), strings.Join(in.ProducerWorkers, ", "), in.MinWorkers)
		return nil, nil, temporal.NewNonRetryableApplicationError(msg, "BadConfig", nil)
	}
	return tasks, producers, nil
}
