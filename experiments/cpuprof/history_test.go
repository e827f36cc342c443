package cpuprof

import (
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// history builds a workflow history from compact steps: "S:<activity>"
// schedules, "C:<n>" completes the n-th scheduled activity (1-based),
// "T" is a completed workflow task, "E" the workflow's end.
func history(base time.Time, steps ...string) []*historypb.HistoryEvent {
	var evs []*historypb.HistoryEvent
	var scheduled []int64
	for i, st := range steps {
		ev := &historypb.HistoryEvent{EventId: int64(i + 1), EventTime: timestamppb.New(base.Add(time.Duration(i) * time.Second))}
		switch {
		case strings.HasPrefix(st, "S:"):
			ev.EventType = enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
			ev.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: st[2:]}}}
			scheduled = append(scheduled, ev.EventId)
		case strings.HasPrefix(st, "C:"):
			n, _ := strconv.Atoi(st[2:])
			ev.EventType = enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
			ev.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
				ScheduledEventId: scheduled[n-1]}}
		case st == "T":
			ev.EventType = enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
		case st == "E":
			ev.EventType = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestProducersStarted(t *testing.T) {
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		steps  []string
		ok     bool
		atStep int // 1-based step whose time is the start
		closed bool
	}{
		{"nothing yet", []string{"T", "S:DeployTasks"}, false, 0, false},
		{"producer scheduled", []string{"T", "S:StartTasks", "C:1", "T", "S:StartProducer"}, false, 0, false},
		{"producer done, no task after", []string{"T", "S:StartProducer", "C:1"}, false, 0, false},
		{"one producer", []string{"T", "S:StartProducer", "C:1", "T"}, true, 4, false},
		{"second producer pending", []string{"T", "S:StartProducer", "C:1", "T", "S:StartProducer"}, false, 0, false},
		{"two producers", []string{"T", "S:StartProducer", "C:1", "T", "S:StartProducer", "C:2", "T", "S:StopProducer"}, true, 7, false},
		{"other activity completes after", []string{"T", "S:StartProducer", "C:1", "T", "S:StopProducer", "C:2", "T"}, true, 4, false},
		{"failed before producers", []string{"T", "S:DeployTasks", "E"}, false, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, ok, closed := ProducersStarted(history(base, tc.steps...))
			if ok != tc.ok || closed != tc.closed {
				t.Fatalf("ok=%v closed=%v, want ok=%v closed=%v", ok, closed, tc.ok, tc.closed)
			}
			if want := base.Add(time.Duration(tc.atStep-1) * time.Second); ok && !at.Equal(want) {
				t.Errorf("at %s, want %s (step %d)", at, want, tc.atStep)
			}
		})
	}
}
