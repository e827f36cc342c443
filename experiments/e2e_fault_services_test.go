package experiments_test

// Fault tests: Temporal or NATS is kill -9'd and restarted in the middle
// of an experiment.

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"koala/deploy/local"
	"koala/workflows"
)

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
