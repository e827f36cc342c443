package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"koala/experiments"
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
			at, ok, closed := producersStarted(history(base, tc.steps...))
			if ok != tc.ok || closed != tc.closed {
				t.Fatalf("ok=%v closed=%v, want ok=%v closed=%v", ok, closed, tc.ok, tc.closed)
			}
			if want := base.Add(time.Duration(tc.atStep-1) * time.Second); ok && !at.Equal(want) {
				t.Errorf("at %s, want %s (step %d)", at, want, tc.atStep)
			}
		})
	}
}

func TestProfileWindow(t *testing.T) {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	skip := int(experiments.CompareWarmupSec) + 2
	for _, tc := range []struct{ runtime, max, want int }{
		{40, 0, 40 - 1 - skip},
		{40, 10, 10},
		{40, 100, 40 - 1 - skip},
		{skip + 1, 0, 0}, // no window
	} {
		from, secs := profileWindow(start, tc.runtime, tc.max)
		if secs != tc.want || !from.Equal(start.Add(time.Duration(skip)*time.Second)) {
			t.Errorf("profileWindow(runtime %d, max %d) = %s, %d; want +%ds, %d", tc.runtime, tc.max, from, secs, skip, tc.want)
		}
	}
}

// Without a worker serving pprof, --profile stops at once and names the
// stack flag; with one, the others are noted.
func TestNewBenchProfilesEndpoints(t *testing.T) {
	run := t.TempDir()
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	for _, w := range []string{"w1", "w2"} {
		if err := os.WriteFile(filepath.Join(run, "worker-"+w+".pid"), pid, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := Options{RunDir: run, ResultsDir: filepath.Join(t.TempDir(), "results")}
	_, err := newBenchProfiles(o, "s1", true)
	if err == nil || !strings.Contains(err.Error(), "--worker-pprof") || !strings.Contains(err.Error(), "2 running workers") {
		t.Fatalf("no endpoints: err %v, want one naming --worker-pprof and the 2 workers", err)
	}
	if p, err := newBenchProfiles(o, "s2", false); err != nil || p.dir != filepath.Join(o.ResultsDir, "run-s2", "profiles") {
		t.Fatalf("micro only: %+v, %v; want no endpoint needed", p, err)
	}
	if err := os.WriteFile(filepath.Join(run, "worker-w2.pprof"), []byte("127.0.0.1:41237\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := newBenchProfiles(o, "s3", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.endpoints) != 1 || p.endpoints[0].ID != "w2" || len(p.notes) != 1 || !strings.Contains(p.notes[0], "worker w1") {
		t.Fatalf("endpoints %+v notes %q; want w2 profiled and w1 noted", p.endpoints, p.notes)
	}
	if st, err := os.Stat(p.dir); err != nil || !st.IsDir() {
		t.Fatalf("profiles dir %s: %v", p.dir, err)
	}
	o.ProfileSec = -1
	if _, err := newBenchProfiles(o, "s4", true); err == nil || !strings.Contains(err.Error(), "--profile-seconds -1") {
		t.Fatalf("negative --profile-seconds: %v", err)
	}
}
