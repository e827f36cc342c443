package experiments_test

// Fault tests: the shared stack (see e2e_stack_test.go) loses a service in
// the middle of an experiment and the experiment must still complete
// exactly (0 lost, 0 duplicated), or, when the loss cannot be survived (a
// worker with its tasks), fail promptly with a reason that names it. One
// file per fault kind: e2e_fault_controller_test.go (controller crash per
// reconfiguration step), e2e_fault_services_test.go (Temporal and NATS
// restarts), e2e_fault_kafka_test.go (Kafka broker restart),
// e2e_fault_worker_test.go (worker loss), e2e_fault_unreachable_test.go
// (services that cannot be reached at all), e2e_fault_fuzz_test.go (every
// fuzz target for a bounded time). This file holds their shared helpers.
//
// A test that fails stops the shared stack (a later test starts a fresh
// one), so no job of a broken run keeps running on the workers.

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"koala/deploy/local"
	"koala/workflows"
)

// awaitTriggerTimer waits until experiment id runs and sleeps on the
// durable timer of its first reconfiguration.
func awaitTriggerTimer(ctx context.Context, t *testing.T, tc client.Client, id string) {
	t.Helper()
	if err := poll(ctx, 90*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		evs, err := historyEvents(ctx, tc, id)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.GetEventType() == enumspb.EVENT_TYPE_TIMER_STARTED {
				return nil
			}
		}
		return fmt.Errorf("%s has not started its trigger timer yet", id)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestFaultTemporalRestart kills Temporal (kill -9) while the experiment
// runs, before its reconfiguration fires, and starts it again on the same

// ---------------------------------------------------------------- helpers

// closedPort returns 127.0.0.1:port of a port nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// faultConfig writes testdata/e2e/<name> with the stack's Kafka brokers and
// the overrides (key "trigger" sets the first reconfiguration's
// TriggerTimeSeconds) to a temporary file and returns its path.
func faultConfig(t *testing.T, cfg local.Config, name string, overrides map[string]any) string {
	t.Helper()
	m := readJSONObject(t, filepath.Join("testdata", "e2e", name))
	m["KafkaBrokers"] = cfg.KafkaBrokers()
	for k, v := range overrides {
		if k == "trigger" {
			m["Reconfigurations"].([]any)[0].(map[string]any)["TriggerTimeSeconds"] = v
			continue
		}
		m[k] = v
	}
	return writeJSONObject(t, filepath.Join(t.TempDir(), name), m)
}

// startDetached starts the experiment with `koala run --detach`.
func startDetached(ctx context.Context, t *testing.T, cfg local.Config, path, id string) {
	t.Helper()
	res := runKoala(ctx, t, cfg.Env(), "run", path, "--detach",
		"--temporal", cfg.TemporalAddr(), "--kafka", strings.Join(cfg.KafkaBrokers(), ","),
		"--results", t.TempDir(), "--id", id, "--ui", cfg.TemporalUIURL())
	if res.exitCode != 0 {
		t.Fatalf("koala run --detach exited %d\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.stdout, res.stderr)
	}
}

// guardRun makes sure that, whatever happens, the service the test kills
// runs again when the test ends; a failed test terminates its workflow and
// stops the shared stack, so no job of it keeps running.
func guardRun(t *testing.T, cfg local.Config, c client.Client, id, service string) {
	t.Cleanup(func() {
		if !t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := local.StartService(ctx, cfg, service); err != nil {
				t.Errorf("restart %s after the test: %v", service, err)
				stopSharedStack()
			}
			return
		}
		t.Logf("the test failed: stack logs%s", stackLogTails(cfg))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.TerminateWorkflow(ctx, id, "", "fault test failed")
		if err := stopSharedStack(); err != nil {
			t.Errorf("stop the shared stack: %v", err)
		}
	})
}

// pendingActivity returns the pending activity of type typ of workflow id.
func pendingActivity(ctx context.Context, c client.Client, id, typ string) (interface {
	GetState() enumspb.PendingActivityState
	GetAttempt() int32
}, error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, err
	}
	var seen []string
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() == typ {
			return pa, nil
		}
		seen = append(seen, pa.GetActivityType().GetName())
	}
	return nil, fmt.Errorf("%s has no pending %s (pending: %v)", id, typ, seen)
}

// awaitExperiment polls the workflow's status until it closes (Describe,
// not a long poll, so that a Temporal restart does not end the wait) and
// returns its result.
func awaitExperiment(ctx context.Context, t *testing.T, cfg local.Config, c client.Client, id string, timeout time.Duration) workflows.ExperimentResult {
	t.Helper()
	start := time.Now()
	var status enumspb.WorkflowExecutionStatus
	if err := poll(ctx, timeout, 500*time.Millisecond, func(ctx context.Context) error {
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return err
		}
		status = d.GetWorkflowExecutionInfo().GetStatus()
		if status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			var pend []string
			for _, pa := range d.GetPendingActivities() {
				pend = append(pend, fmt.Sprintf("%s(attempt %d, %v, last failure %q)", pa.GetActivityType().GetName(), pa.GetAttempt(), pa.GetState(), pa.GetLastFailure().GetMessage()))
			}
			return fmt.Errorf("%s still running; pending activities %v", id, pend)
		}
		return nil
	}); err != nil {
		child := workflows.JobIDFor(id) + "-reconfig-1"
		var childPend []string
		if d, derr := c.DescribeWorkflowExecution(ctx, child, ""); derr == nil {
			for _, pa := range d.GetPendingActivities() {
				var beat string
				if p := pa.GetHeartbeatDetails().GetPayloads(); len(p) > 0 {
					_ = converter.GetDefaultDataConverter().FromPayload(p[0], &beat)
				}
				childPend = append(childPend, fmt.Sprintf("%s(attempt %d, %v, last failure %q, last heartbeat: still waiting for %q)",
					pa.GetActivityType().GetName(), pa.GetAttempt(), pa.GetState(), pa.GetLastFailure().GetMessage(), beat))
			}
		}
		t.Fatalf("experiment %s: %v; %s pending %v", id, err, child, childPend)
	}
	var out workflows.ExperimentResult
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		t.Fatalf("experiment %s ended %v: %v", id, status, err)
	}
	t.Logf("experiment %s completed %.1f s after the wait began: produced %d (failed %d), sink received %d distinct %d duplicates %d, lost %d duplicated %d",
		id, time.Since(start).Seconds(), out.Produced, out.ProduceFailed, out.Sink.Received, out.Sink.Distinct, out.Sink.Duplicates, out.Lost, out.Duplicated)
	return out
}

func checkExactness(t *testing.T, out workflows.ExperimentResult) {
	t.Helper()
	if out.Produced <= 0 {
		t.Errorf("Produced = %d, want > 0", out.Produced)
	}
	if out.Lost != 0 || out.Duplicated != 0 {
		t.Errorf("Lost = %d, Duplicated = %d, want 0 and 0", out.Lost, out.Duplicated)
	}
	if int64(out.Sink.Distinct) != out.Produced {
		t.Errorf("Sink.Distinct = %d, Produced = %d: want equal", out.Sink.Distinct, out.Produced)
	}
}

func checkReconfig(t *testing.T, out workflows.ExperimentResult, childID string, wantSteps []string) {
	t.Helper()
	if len(out.Reconfigs) != 1 {
		t.Fatalf("%d reconfigurations in the result, want 1: %+v", len(out.Reconfigs), out.Reconfigs)
	}
	rc := out.Reconfigs[0]
	if rc.WorkflowID != childID {
		t.Errorf("reconfiguration workflow id = %q, want %q", rc.WorkflowID, childID)
	}
	var names []string
	for _, s := range rc.Steps {
		names = append(names, s.Step)
	}
	if !slices.Equal(names, wantSteps) {
		t.Errorf("reconfiguration steps = %v, want %v", names, wantSteps)
	}
	if len(out.Final.Tasks) == 0 {
		t.Errorf("no final deployment")
	}
	t.Logf("reconfiguration %s: %.2f s → %.2f s, steps %+v", rc.ID, rc.StartSec, rc.EndSec, rc.Steps)
}

// completedActivities lists the activity types workflow id has completed.
func completedActivities(ctx context.Context, c client.Client, id string) ([]string, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	types := map[int64]string{}
	var out []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			types[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			out = append(out, types[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()])
		}
	}
	return out, nil
}

// activityOutcome is one activity of a history with how it ended.
type activityOutcome struct {
	ScheduledID int64
	Type        string
	Attempt     int32 // of the ActivityTaskStarted event (the last attempt)
	Completed   bool
	Failure     string // of ActivityTaskFailed / TimedOut, if any
}

func historyEvents(ctx context.Context, c client.Client, id string) ([]interface {
	GetEventType() enumspb.EventType
}, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []interface {
		GetEventType() enumspb.EventType
	}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// activityOutcomes reads workflow id's history and returns its activities
// in scheduling order, each with its last attempt and outcome, and checks
// the workflow completed.
func activityOutcomes(ctx context.Context, t *testing.T, c client.Client, id string) []activityOutcome {
	t.Helper()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var outs []activityOutcome
	index := map[int64]int{}
	var last enumspb.EventType
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		last = ev.GetEventType()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			index[ev.GetEventId()] = len(outs)
			outs = append(outs, activityOutcome{ScheduledID: ev.GetEventId(), Type: ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()})
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if i, ok := index[a.GetScheduledEventId()]; ok {
				outs[i].Attempt = a.GetAttempt()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if i, ok := index[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
				outs[i].Completed = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			if i, ok := index[a.GetScheduledEventId()]; ok {
				outs[i].Failure = "failed: " + a.GetFailure().GetMessage()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := ev.GetActivityTaskTimedOutEventAttributes()
			if i, ok := index[a.GetScheduledEventId()]; ok {
				outs[i].Failure = "timed out: " + a.GetFailure().GetMessage()
			}
		}
	}
	if last != enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED {
		t.Errorf("%s: last history event is %v, want WorkflowExecutionCompleted", id, last)
	}
	return outs
}
