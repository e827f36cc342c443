package cpuprof

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
)

// When a RunExperiment run's input starts, read from its workflow history:
// the reference its profile windows are placed from.

// activityStartProducer is the activity type that starts a producer (the
// method name of activities.Activities).
const activityStartProducer = "StartProducer"

// WaitProducersStarted polls run's history until its producers run and
// returns when they started; an error once the run closed first, or after
// limit.
func WaitProducersStarted(ctx context.Context, tc client.Client, run client.WorkflowRun, limit time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		var events []*historypb.HistoryEvent
		it := tc.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var err error
		for it.HasNext() {
			var ev *historypb.HistoryEvent
			if ev, err = it.Next(); err != nil {
				break
			}
			events = append(events, ev)
		}
		if err == nil {
			at, ok, closed := ProducersStarted(events)
			switch {
			case ok:
				return at, nil
			case closed:
				return time.Time{}, fmt.Errorf("workflow %s ended before its producers started: no profile", run.GetID())
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for the producers of %s: %w (last history read: %v)", run.GetID(), ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ProducersStarted reads a RunExperiment history: the workflow starts its
// producers one StartProducer activity after another and then takes the
// run's start time. They all run once a StartProducer completed and the
// next workflow task completed without scheduling another; at is that
// task's time. closed reports a workflow that ended.
func ProducersStarted(events []*historypb.HistoryEvent) (at time.Time, ok, closed bool) {
	producerTasks := map[int64]bool{} // scheduled event id → is StartProducer
	var lastDone int64                // event id of the last completed StartProducer
	pendingAfter := false             // a StartProducer scheduled after lastDone
	for _, ev := range events {
		id := ev.GetEventId()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activityStartProducer {
				producerTasks[id] = true
				if lastDone != 0 {
					pendingAfter = true
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if producerTasks[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				lastDone, pendingAfter, at = id, false, time.Time{}
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if lastDone != 0 && !pendingAfter && at.IsZero() {
				at = ev.GetEventTime().AsTime()
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			closed = true
		}
	}
	// The task after the last completion must not have scheduled another
	// StartProducer: the scheduled event follows its completion event.
	if !at.IsZero() && !pendingAfter {
		return at, true, closed
	}
	return time.Time{}, false, closed
}
