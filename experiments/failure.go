package experiments

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"koala/activities"
)

// FailureStatus is the status line of a run that failed with err:
// "failed: worker lost" when a worker stopped sending heartbeats (the
// reason, naming the worker and its silence, is in err), "failed"
// otherwise.
func FailureStatus(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeWorkerLost {
		return "failed: worker lost"
	}
	return "failed"
}
