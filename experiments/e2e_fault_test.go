package experiments_test

// Fault tests: the shared stack (see e2e_stack_test.go) loses a service in
// the middle of an experiment — the controller is kill -9'd while a
// reconfiguration step runs, Temporal or NATS is killed and restarted — and
// the experiment must still complete exactly (0 lost, 0 duplicated). Plus
// clear, fast errors when a service cannot be reached at all.
//
// A test that fails stops the shared stack (a later test starts a fresh
// one), so no job of a broken run keeps running on the workers.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"koala/dataplane/control"
	"koala/deploy/local"
	"koala/workflows"
)

// Steps of the counter 2→4 scale-out (stateful, pebble) per protocol.
var (
	faultLazySteps = lazySteps
	faultSRSteps   = []string{"plan", "pause-and-drain", "deploy-tasks", "start-tasks", "move-state", "await-migration", "update-routing", "resume"}
)

func TestFaultControllerCrash(t *testing.T) {
	cases := []struct {
		name, config, activity string
		steps                  []string
		// afterKLT kills the controller once the first new owner announced
		// klt-installed: the running Handoff has seen (and lost with the
		// crash) part of what it waits for.
		afterKLT bool
	}{
		{"lazy/StartTasks", "fault_lazy_counter.json", "StartTasks", faultLazySteps, false},
		{"lazy/Handoff", "fault_lazy_counter.json", "Handoff", faultLazySteps, false},
		{"lazy/Handoff-after-klt-installed", "fault_lazy_counter.json", "Handoff", faultLazySteps, true},
		{"lazy/SwapRoutes", "fault_lazy_counter.json", "SwapRoutes", faultLazySteps, false},
		{"lazy/AwaitMigration", "fault_lazy_counter.json", "AwaitMigration", faultLazySteps, false},
		{"stop-and-restart/PauseAndDrain", "fault_sr_counter.json", "PauseAndDrain", faultSRSteps, false},
		{"stop-and-restart/StartTasks", "fault_sr_counter.json", "StartTasks", faultSRSteps, false},
		{"stop-and-restart/Handoff", "fault_sr_counter.json", "Handoff", faultSRSteps, false},
		{"stop-and-restart/UpdateRouting", "fault_sr_counter.json", "UpdateRouting", faultSRSteps, false},
		{"stop-and-restart/ResumeSources", "fault_sr_counter.json", "ResumeSources", faultSRSteps, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sharedStack(t)
			begin := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			path := faultConfig(t, cfg, tc.config, nil)
			id := fmt.Sprintf("e2e-fault-ctl-%s-%d", strings.ToLower(tc.activity), time.Now().UnixNano())
			childID := workflows.JobIDFor(id) + "-reconfig-1"
			tc2 := temporalClient(ctx, t, cfg)
			guardRun(t, cfg, tc2, id, "controller")
			var klt chan *nats.Msg
			if tc.afterKLT {
				nc, err := nats.Connect(cfg.NATSURL(), nats.Name("e2e-fault-test"))
				if err != nil {
					t.Fatal(err)
				}
				defer nc.Close()
				klt = make(chan *nats.Msg, 1024)
				sub, err := nc.ChanSubscribe(control.ProgressSubject(workflows.JobIDFor(id)), klt)
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Unsubscribe()
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			startDetached(ctx, t, cfg, path, id)

			// Kill the controller while the chosen activity runs.
			var atKill string
			if klt != nil {
				wait := time.NewTimer(90 * time.Second)
				defer wait.Stop()
			waitKLT:
				for {
					select {
					case <-wait.C:
						t.Fatalf("no %s event of %s within 90 s", control.EventKLTInstalled, childID)
					case m := <-klt:
						var ev control.MigrationProgress
						if json.Unmarshal(m.Data, &ev) == nil && ev.Event == control.EventKLTInstalled && ev.ReconfigID == childID {
							atKill = fmt.Sprintf("task %s announced klt-installed from %s", ev.TaskID, ev.From)
							break waitKLT
						}
					}
				}
			} else if err := poll(ctx, 90*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
				pa, err := pendingActivity(ctx, tc2, childID, tc.activity)
				if err != nil {
					// A short step may run and finish between two polls: then
					// the crash hits the steps after it, which is a fault
					// worth surviving too.
					if done, herr := completedActivities(ctx, tc2, childID); herr == nil && slices.Contains(done, tc.activity) {
						atKill = "missed: it had already completed"
						return nil
					}
					return err
				}
				if pa.GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
					return fmt.Errorf("%s of %s is %v", tc.activity, childID, pa.GetState())
				}
				atKill = fmt.Sprintf("attempt %d, state %v", pa.GetAttempt(), pa.GetState())
				return nil
			}); err != nil {
				t.Fatalf("waiting for %s to run: %v", tc.activity, err)
			}
			killedAt := time.Now()
			pid, err := local.KillService(cfg, "controller")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%.1f s: killed the controller (pid %d) with kill -9 while %s ran (%s)",
				killedAt.Sub(begin).Seconds(), pid, tc.activity, atKill)
			// Was the step still running when the controller was gone?
			midFlight := false
			if pa, err := pendingActivity(ctx, tc2, childID, tc.activity); err == nil {
				midFlight = true
				t.Logf("after the kill, %s is still pending (%v, attempt %d): the crash hit it mid-flight", tc.activity, pa.GetState(), pa.GetAttempt())
			} else {
				t.Logf("after the kill, %s is not pending any more (%v): it completed before the controller died", tc.activity, err)
			}

			newPID, err := local.StartService(ctx, cfg, "controller")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%.1f s: controller restarted (pid %d), %.1f s after the kill",
				time.Since(begin).Seconds(), newPID, time.Since(killedAt).Seconds())

			// A correct run ends within a heartbeat timeout (30 s), a few
			// retries and the rest of its 24 s; a stuck retry would wait out
			// the step's own timeout (minutes).
			out := awaitExperiment(ctx, t, cfg, tc2, id, 3*time.Minute)
			checkExactness(t, out)
			checkReconfig(t, out, childID, tc.steps)

			outs := activityOutcomes(ctx, t, tc2, childID)
			var crashed *activityOutcome
			for i := range outs {
				o := &outs[i]
				t.Logf("%s: %-14s scheduled as event %d, attempt %d, completed %v %s", childID, o.Type, o.ScheduledID, o.Attempt, o.Completed, o.Failure)
				if !o.Completed {
					t.Errorf("%s: %s (event %d) did not complete: %s", childID, o.Type, o.ScheduledID, o.Failure)
				}
				if o.Type == tc.activity && crashed == nil {
					crashed = o
				}
			}
			if crashed == nil {
				t.Fatalf("%s has no %s activity", childID, tc.activity)
			}
			if !crashed.Completed {
				t.Errorf("%s, running at the crash, did not complete", tc.activity)
			}
			if midFlight && crashed.Attempt < 2 {
				t.Errorf("%s was pending after the controller died but completed on attempt %d; want a retry (attempt ≥ 2)", tc.activity, crashed.Attempt)
			}
			t.Logf("%s took %s (crash → done %s)", t.Name(), time.Since(begin).Round(time.Millisecond), time.Since(killedAt).Round(time.Millisecond))
		})
	}
}

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
// SQLite file: the experiment goes on and completes exactly.
func TestFaultTemporalRestart(t *testing.T) {
	cfg := sharedStack(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// A later trigger leaves room for the restart before it.
	path := faultConfig(t, cfg, "fault_lazy_counter.json", map[string]any{"TotalRuntimeSeconds": 30, "trigger": 14})
	id := fmt.Sprintf("e2e-fault-temporal-%d", time.Now().UnixNano())
	childID := workflows.JobIDFor(id) + "-reconfig-1"
	tc := temporalClient(ctx, t, cfg)
	guardRun(t, cfg, tc, id, "temporal")
	startDetached(ctx, t, cfg, path, id)

	// Wait until the job runs and the workflow sleeps on its trigger timer.
	awaitTriggerTimer(ctx, t, tc, id)
	killedAt := time.Now()
	pid, err := local.KillService(cfg, "temporal")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: killed Temporal (pid %d) with kill -9", killedAt.Sub(begin).Seconds(), pid)
	newPID, err := local.StartService(ctx, cfg, "temporal")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: Temporal restarted on %s (pid %d), ready %.1f s after the kill",
		time.Since(begin).Seconds(), filepath.Join(cfg.RunDir, "temporal.db"), newPID, time.Since(killedAt).Seconds())

	out := awaitExperiment(ctx, t, cfg, tc, id, 5*time.Minute)
	checkExactness(t, out)
	checkReconfig(t, out, childID, faultLazySteps)
	t.Logf("TestFaultTemporalRestart took %s", time.Since(begin).Round(time.Millisecond))
}

// TestFaultNATSRestart kills NATS (kill -9) while the experiment runs and
// starts it again: workers and controller reconnect and the experiment,
// including its reconfiguration, completes exactly.
func TestFaultNATSRestart(t *testing.T) {
	cfg := sharedStack(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	path := faultConfig(t, cfg, "fault_lazy_counter.json", map[string]any{"TotalRuntimeSeconds": 30, "trigger": 14})
	id := fmt.Sprintf("e2e-fault-nats-%d", time.Now().UnixNano())
	childID := workflows.JobIDFor(id) + "-reconfig-1"
	tc := temporalClient(ctx, t, cfg)
	guardRun(t, cfg, tc, id, "nats")
	startDetached(ctx, t, cfg, path, id)

	awaitTriggerTimer(ctx, t, tc, id)
	killedAt := time.Now()
	pid, err := local.KillService(cfg, "nats")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: killed NATS (pid %d) with kill -9", killedAt.Sub(begin).Seconds(), pid)
	newPID, err := local.StartService(ctx, cfg, "nats")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: NATS restarted (pid %d), %.1f s after the kill", time.Since(begin).Seconds(), newPID, time.Since(killedAt).Seconds())
	// The workers answer pings again once they reconnected.
	if err := poll(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		got, err := local.PingWorkers(ctx, cfg.NATSURL(), 300*time.Millisecond)
		if err != nil {
			return err
		}
		for _, w := range cfg.WorkerIDs() {
			if !got[w] {
				return fmt.Errorf("worker %s does not answer pings (got %v)", w, got)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: every worker answers pings again", time.Since(begin).Seconds())

	out := awaitExperiment(ctx, t, cfg, tc, id, 5*time.Minute)
	checkExactness(t, out)
	checkReconfig(t, out, childID, faultLazySteps)
	t.Logf("TestFaultNATSRestart took %s", time.Since(begin).Round(time.Millisecond))
}

// TestFaultUnreachableServices points the CLI at closed ports: each command
// exits non-zero within 15 s and names the service and the address.
func TestFaultUnreachableServices(t *testing.T) {
	cfg := sharedStack(t) // a reachable Temporal for the controller's NATS case
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	closed := closedPort(t)
	path := faultConfig(t, cfg, "fault_lazy_counter.json", nil)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"run/temporal", []string{"run", path, "--temporal", closed, "--results", t.TempDir(), "--id", "e2e-fault-unreachable"},
			[]string{"Temporal", closed}},
		{"controller/temporal", []string{"controller", "--temporal", closed, "--nats", cfg.NATSURL(), "--clickhouse", "none"},
			[]string{"Temporal", closed}},
		{"controller/nats", []string{"controller", "--temporal", cfg.TemporalAddr(), "--nats", "nats://" + closed, "--clickhouse", "none"},
			[]string{"NATS", "nats://" + closed}},
		{"worker/nats", []string{"worker", "--id", "e2e-unreachable", "--nats", "nats://" + closed, "--clickhouse", "none", "--data-dir", t.TempDir()},
			[]string{"NATS", "nats://" + closed}},
		{"controller/clickhouse", []string{"controller", "--temporal", cfg.TemporalAddr(), "--nats", cfg.NATSURL(), "--clickhouse", "http://" + closed},
			[]string{"ClickHouse", "http://" + closed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second) // kills a hanging command
			defer ccancel()
			res := runKoala(cctx, t, nil, tc.args...)
			t.Logf("koala %s: exit %d in %s\nstderr: %s", tc.args[0], res.exitCode, res.took.Round(time.Millisecond), strings.TrimSpace(res.stderr))
			if res.exitCode == 0 {
				t.Errorf("exit 0, want non-zero\nstdout:\n%s", res.stdout)
			}
			if res.took > 15*time.Second {
				t.Errorf("took %s, want ≤ 15 s", res.took.Round(time.Millisecond))
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
		})
	}
}

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
