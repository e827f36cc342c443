package experiments_test

// Fault test: a worker with tasks of the job is kill -9'd during a
// reconfiguration; the run must fail promptly, say why, and leave nothing
// running.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"koala/activities"
	"koala/dataplane/control"
	"koala/deploy/local"
	"koala/workflows"
)

// workerLostWithin bounds the time from the kill to the failed workflow:
// the allowed silence (10 s), the grace a failing step waits for the watch
// (5 s), stopping the job, and slack for a loaded machine.
const workerLostWithin = 45 * time.Second

// TestFaultWorkerLost runs `koala run` (following the workflow), kills one
// worker that hosts counter tasks with kill -9 while the reconfiguration
// runs, and checks that
//   - the workflow fails within workerLostWithin with a WorkerLost error
//     "worker wN lost: no heartbeat for …s";
//   - the reconfiguration child did not complete (it was cancelled or
//     failed; no half-done reconfiguration is reported as done);
//   - no surviving worker hosts a task of the job any more;
//   - the CLI exits non-zero, prints "failed: worker lost" and the reason.
//
// The killed worker is started again when the test ends.
func TestFaultWorkerLost(t *testing.T) {
	cfg := sharedStack(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	path := faultConfig(t, cfg, "fault_lazy_counter.json", map[string]any{"TotalRuntimeSeconds": 90, "trigger": 8})
	id := fmt.Sprintf("e2e-fault-worker-%d", time.Now().UnixNano())
	jobID := workflows.JobIDFor(id)
	childID := jobID + "-reconfig-1"
	tc := temporalClient(ctx, t, cfg)
	nc, err := nats.Connect(cfg.NATSURL(), nats.Name("e2e-fault-worker-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// `koala run` follows the workflow until it ends.
	cli := startRun(ctx, t, cfg, path, id)

	// Once the job runs, pick a worker that hosts counter tasks.
	var victim string
	if err := poll(ctx, 90*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		hosts, err := jobHosts(nc, jobID)
		if err != nil {
			return err
		}
		for _, w := range cfg.WorkerIDs() {
			if slices.ContainsFunc(hosts[w], func(task string) bool { return strings.HasPrefix(task, "counter-") }) {
				victim = w
			}
		}
		if victim == "" {
			return fmt.Errorf("no worker hosts a counter task of %s yet (tasks: %v)", jobID, hosts)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	service := "worker-" + victim
	guardRun(t, cfg, tc, id, service)

	// Kill it while the reconfiguration child runs one of its steps.
	var atKill string
	if err := poll(ctx, 90*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
		d, err := tc.DescribeWorkflowExecution(ctx, childID, "")
		if err != nil {
			return err
		}
		if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Errorf("%s is %v", childID, st)
		}
		for _, pa := range d.GetPendingActivities() {
			atKill = fmt.Sprintf("%s (%v)", pa.GetActivityType().GetName(), pa.GetState())
			return nil
		}
		return fmt.Errorf("%s runs no step yet", childID)
	}); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	pid, err := local.KillService(cfg, service)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: killed worker %s (pid %d) with kill -9 while %s ran %s", killedAt.Sub(begin).Seconds(), victim, pid, childID, atKill)

	// The workflow fails, in time, for that reason.
	var status enumspb.WorkflowExecutionStatus
	if err := poll(ctx, workerLostWithin, 200*time.Millisecond, func(ctx context.Context) error {
		d, err := tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return err
		}
		if status = d.GetWorkflowExecutionInfo().GetStatus(); status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Errorf("%s still running", id)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v after the kill of %s", err, victim)
	}
	failedAfter := time.Since(killedAt)
	t.Logf("%s ended %v %.1f s after the kill", id, status, failedAfter.Seconds())
	if status != enumspb.WORKFLOW_EXECUTION_STATUS_FAILED {
		t.Fatalf("%s ended %v, want FAILED", id, status)
	}
	werr := tc.GetWorkflow(ctx, id, "").Get(ctx, nil)
	var appErr *temporal.ApplicationError
	if !errors.As(werr, &appErr) || appErr.Type() != activities.ErrTypeWorkerLost {
		t.Fatalf("workflow error %v, want a %s error", werr, activities.ErrTypeWorkerLost)
	}
	wantReason := fmt.Sprintf("worker %s lost: no heartbeat for ", victim)
	if !strings.HasPrefix(appErr.Message(), wantReason) {
		t.Errorf("reason %q, want it to start with %q", appErr.Message(), wantReason)
	}
	t.Logf("reason: %s", appErr.Message())

	// The reconfiguration in flight did not complete.
	cd, err := tc.DescribeWorkflowExecution(ctx, childID, "")
	if err != nil {
		t.Fatal(err)
	}
	childStatus := cd.GetWorkflowExecutionInfo().GetStatus()
	t.Logf("%s ended %v", childID, childStatus)
	if childStatus == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || childStatus == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("%s is %v after the run failed, want it cancelled, failed or terminated", childID, childStatus)
	}

	// No surviving worker hosts a task of the job.
	hosts, err := jobHosts(nc, jobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.WorkerIDs() {
		if w != victim && len(hosts[w]) > 0 {
			t.Errorf("worker %s still hosts tasks of %s after the failure: %v", w, jobID, hosts[w])
		}
	}
	if _, ok := hosts[victim]; ok {
		t.Errorf("the killed worker %s still answers pings", victim)
	}

	// The CLI says so.
	var res cliResult
	select {
	case res = <-cli:
	case <-time.After(time.Minute):
		t.Fatalf("koala run did not exit within a minute of the failure")
	}
	t.Logf("koala run: exit %d after %s\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.took.Round(time.Millisecond), res.stdout, strings.TrimSpace(res.stderr))
	if res.exitCode == 0 {
		t.Errorf("koala run exited 0 for a failed run")
	}
	if !strings.Contains(res.stdout, "failed: worker lost") {
		t.Errorf("koala run's output lacks %q", "failed: worker lost")
	}
	if !strings.Contains(res.stderr, wantReason) {
		t.Errorf("koala run's error lacks %q", wantReason)
	}
	t.Logf("TestFaultWorkerLost took %s (failed %.1f s after the kill)", time.Since(begin).Round(time.Millisecond), failedAfter.Seconds())
}

// jobHosts pings every worker and returns, per worker that answered, the
// tasks of job it hosts.
func jobHosts(nc *nats.Conn, jobID string) (map[string][]string, error) {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(control.SubjectPing, inbox, nil); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	end := time.Now().Add(time.Second)
	for {
		msg, err := sub.NextMsg(time.Until(end))
		if err != nil {
			return out, nil // the window is over
		}
		var info control.WorkerInfo
		if err := json.Unmarshal(msg.Data, &info); err != nil {
			return nil, fmt.Errorf("ping reply %q: %w", msg.Data, err)
		}
		tasks := []string{}
		for _, k := range info.Tasks {
			if task, ok := strings.CutPrefix(k, jobID+"/"); ok {
				tasks = append(tasks, task)
			}
		}
		out[info.ID] = tasks
	}
}
