package experiments_test

// Fault tests: Temporal or NATS is kill -9'd and restarted in the middle
// of an experiment.

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"koala/deploy/local"
	"koala/workflows"
)

// TestFaultTemporalRestart kills the Temporal dev server (kill -9) while the
// experiment waits for its reconfiguration and restarts it on the same
// SQLite file: the experiment goes on and completes exactly.
func TestFaultTemporalRestart(t *testing.T) {
	// A later trigger leaves room for the restart before it.
	f := startServiceFault(t, "temporal", 8*time.Minute, 30, 14)
	// Wait until the job runs and the workflow sleeps on its trigger timer.
	awaitTriggerTimer(f.ctx, t, f.tc, f.id)
	killedAt := f.killAndRestart(t, "temporal", "Temporal")
	t.Logf("%.1f s: Temporal restarted on %s, ready %.1f s after the kill",
		time.Since(f.begin).Seconds(), filepath.Join(f.cfg.RunDir, "temporal.db"), time.Since(killedAt).Seconds())
	f.finish(t, 5*time.Minute)
}

// TestFaultNATSRestart kills NATS (kill -9) while the experiment runs and
// starts it again: workers and controller reconnect and the experiment,
// including its reconfiguration, completes exactly.
func TestFaultNATSRestart(t *testing.T) {
	f := startServiceFault(t, "nats", 8*time.Minute, 30, 14)
	awaitTriggerTimer(f.ctx, t, f.tc, f.id)
	killedAt := f.killAndRestart(t, "nats", "NATS")
	t.Logf("%.1f s: NATS restarted, %.1f s after the kill", time.Since(f.begin).Seconds(), time.Since(killedAt).Seconds())
	ctx, cfg, begin := f.ctx, f.cfg, f.begin
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

	f.finish(t, 5*time.Minute)
}

// TestFaultUnreachableServices points the CLI at closed ports: each command

// serviceFault is one experiment on the shared stack during which a service
// is killed and restarted: fault_lazy_counter.json with one lazy
// reconfiguration, started detached so the test can act while it runs.
type serviceFault struct {
	cfg     local.Config
	ctx     context.Context
	tc      client.Client
	id      string
	childID string
	begin   time.Time
}

// startServiceFault starts the experiment (runtime and reconfiguration
// trigger in seconds) and guards it: the run is stopped when the test ends.
func startServiceFault(t *testing.T, service string, timeout time.Duration, runtime, trigger int) *serviceFault {
	t.Helper()
	f := &serviceFault{cfg: sharedStack(t), begin: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	f.ctx = ctx
	path := faultConfig(t, f.cfg, "fault_lazy_counter.json", map[string]any{"TotalRuntimeSeconds": runtime, "trigger": trigger})
	f.id = fmt.Sprintf("e2e-fault-%s-%d", service, time.Now().UnixNano())
	f.childID = workflows.JobIDFor(f.id) + "-reconfig-1"
	f.tc = temporalClient(ctx, t, f.cfg)
	guardRun(t, f.cfg, f.tc, f.id, service)
	startDetached(ctx, t, f.cfg, path, f.id)
	return f
}

// killAndRestart kill -9s the service and starts it again with the same
// configuration and data, returning when it was killed.
func (f *serviceFault) killAndRestart(t *testing.T, service, name string) time.Time {
	t.Helper()
	killedAt := time.Now()
	pid, err := local.KillService(f.cfg, service)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: killed %s (pid %d) with kill -9", killedAt.Sub(f.begin).Seconds(), name, pid)
	newPID, err := local.StartService(f.ctx, f.cfg, service)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s is back as pid %d", name, newPID)
	return killedAt
}

// finish waits for the experiment and checks that it completed exactly,
// with every step of its lazy reconfiguration.
func (f *serviceFault) finish(t *testing.T, wait time.Duration) workflows.ExperimentResult {
	t.Helper()
	out := awaitExperiment(f.ctx, t, f.cfg, f.tc, f.id, wait)
	checkExactness(t, out)
	checkReconfig(t, out, f.childID, faultLazySteps)
	t.Logf("%s took %s", t.Name(), time.Since(f.begin).Round(time.Millisecond))
	return out
}
