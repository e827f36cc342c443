package experiments_test

// Fault test: the controller is kill -9'd while a reconfiguration step
// runs; the restarted controller retries the step and the experiment
// completes exactly.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	enumspb "go.temporal.io/api/enums/v1"

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
