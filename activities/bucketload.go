package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
)

// measureBucketLoad measures operator op's input per bucket on the running
// tasks: the records each task kept per bucket, read twice over a window
// of secs seconds (default 2) and summed over the operator's tasks. The
// load is the difference, i.e. the recent rate; when nothing arrived
// during the window, the counts since the tasks started. The result has
// NumBuckets entries and is what the pure planner (plan.Rebalance) takes.
func (a *Activities) measureBucketLoad(ctx context.Context, dep control.Deployment, op string, secs float64) ([]float64, error) {
	if _, ok := dep.Job.Operator(op); !ok {
		err := fmt.Errorf("rebalance: operator %q not found", op)
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidReconfiguration", err)
	}
	if secs <= 0 {
		secs = 2
	}
	first, err := a.bucketCounts(ctx, dep, op)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Duration(secs * float64(time.Second))):
	}
	second, err := a.bucketCounts(ctx, dep, op)
	if err != nil {
		return nil, err
	}
	load := make([]float64, dep.Job.NumBuckets)
	var recent, total float64
	for b := range load {
		load[b] = float64(second[b] - min(first[b], second[b]))
		recent += load[b]
		total += float64(second[b])
	}
	if recent == 0 {
		for b := range load {
			load[b] = float64(second[b])
		}
		if total == 0 {
			err := fmt.Errorf("rebalance of operator %q: its tasks have processed no records yet, so there is no load to plan from (give bucket_load)", op)
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidReconfiguration", err)
		}
	}
	return load, nil
}

// bucketCounts sums the per-bucket record counts of op's tasks.
func (a *Activities) bucketCounts(ctx context.Context, dep control.Deployment, op string) ([]uint64, error) {
	out := make([]uint64, dep.Job.NumBuckets)
	order, groups := tasksByWorker(dep, func(t control.TaskRef) bool { return t.Operator == op })
	for _, wid := range order {
		var st control.StatusReply
		req := control.TasksRequest{TaskIDs: groups[wid], WithBucketLoad: true}
		if err := a.request(ctx, wid, control.VerbStatus, dep.Job.JobID, "", req, &st); err != nil {
			return nil, fmt.Errorf("measure bucket load of %s: %w", op, err)
		}
		for _, s := range st.Tasks {
			if len(s.BucketRecords) != len(out) && len(s.BucketRecords) != 0 {
				return nil, fmt.Errorf("measure bucket load of %s: task %s reports %d buckets, job has %d", op, s.TaskID, len(s.BucketRecords), len(out))
			}
			for b, n := range s.BucketRecords {
				out[b] += n
			}
		}
	}
	return out, nil
}
