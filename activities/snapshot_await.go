package activities

import (
	"context"
	"time"

	"koala/dataplane/control"
)

// AwaitSinkInput waits for Want distinct records at the deployment's sinks.
type AwaitSinkInput struct {
	Deployment  control.Deployment `json:"deployment"`
	Want        uint64             `json:"want"`
	TimeoutSecs float64            `json:"timeout_secs"`
}

// AwaitSinkRecords polls the sinks until they have seen Want distinct
// records or TimeoutSecs passed, and returns the last counts (reaching the
// timeout is not an error: the caller compares the counts). A warm-up run
// uses it to end its input as soon as every warm-up record is in, instead
// of waiting out a run time sized for the slowest machine.
func (a *Activities) AwaitSinkRecords(ctx context.Context, in AwaitSinkInput) (SinkCounts, error) {
	deadline := time.Now().Add(time.Duration(in.TimeoutSecs * float64(time.Second)))
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := a.CollectSinkCounts(ctx, in.Deployment)
		if err != nil {
			return c, err
		}
		heartbeat(ctx, c.Distinct)
		if c.Distinct >= in.Want || time.Now().After(deadline) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-tick.C:
		}
	}
}
