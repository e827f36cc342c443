package experiments

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"koala/activities"
)

// FailureStatus is the status line of a run whose wait ended with err:
// "failed: worker lost" when a worker stopped sending heartbeats (the
// reason, naming the worker and its silence, is in err), "interrupted"
// when the wait itself was cancelled (the workflow may still run),
// "failed" otherwise.
func FailureStatus(err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted (the workflow was not followed to its end)"
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeWorkerLost {
		return "failed: worker lost"
	}
	return "failed"
}
