package experiments

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"koala/activities"
)

func TestFailureStatus(t *testing.T) {
	lost := temporal.NewNonRetryableApplicationError("worker w2 lost: no heartbeat for 10s", activities.ErrTypeWorkerLost, nil)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{lost, "failed: worker lost"},
		{fmt.Errorf("workflow execution error: %w", lost), "failed: worker lost"},
		{temporal.NewApplicationError("disk full", "StepFailed"), "failed"},
		{errors.New("deadline exceeded"), "failed"},
		{fmt.Errorf("get result: %w", context.Canceled), "interrupted (the workflow was not followed to its end)"},
	} {
		if got := FailureStatus(tc.err); got != tc.want {
			t.Errorf("FailureStatus(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
