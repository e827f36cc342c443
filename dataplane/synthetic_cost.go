package dataplane

import (
	"context"
	"time"
)

// spendCost waits the task's synthetic cost (control.ParamSyntheticCost)
// for n records, inside the batch, so it counts as busy time the way an
// operator's call to a slow service would. It returns early, with
// ctx's error, when the task is stopped.
func (t *task) spendCost(ctx context.Context, n int) error {
	if t.cost <= 0 || n <= 0 {
		return nil
	}
	timer := time.NewTimer(time.Duration(n) * t.cost)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
