package experiments_test

// Fault test: the Kafka broker is kill -9'd while the producer writes and
// the sources read, and restarted on the same log directory.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"koala/deploy/local"
	"koala/workflows"
)

// TestFaultKafkaRestart kills the real KRaft broker (kill -9) while the
// experiment runs and starts it again with the same configuration and log
// directory: the producer and the sources (franz-go clients) reconnect, the
// records acknowledged before the crash are still there, and the
// experiment, including its reconfiguration after the restart, completes
// exactly (0 lost, 0 duplicated).
func TestFaultKafkaRestart(t *testing.T) {
	cfg := sharedStack(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The broker needs tens of seconds to come back on a loaded machine;
	// the reconfiguration fires after that, the input ends later still.
	path := faultConfig(t, cfg, "fault_lazy_counter.json", map[string]any{"TotalRuntimeSeconds": 50, "trigger": 34})
	id := fmt.Sprintf("e2e-fault-kafka-%d", time.Now().UnixNano())
	childID := workflows.JobIDFor(id) + "-reconfig-1"
	tc := temporalClient(ctx, t, cfg)
	guardRun(t, cfg, tc, id, "kafka")
	startDetached(ctx, t, cfg, path, id)

	// The job runs and the producer writes once the workflow sleeps on its
	// trigger timer; let some records reach the log before the crash.
	awaitTriggerTimer(ctx, t, tc, id)
	logDir := filepath.Join(cfg.RunDir, "kafka", "data")
	if err := poll(ctx, time.Minute, 200*time.Millisecond, func(context.Context) error {
		if n := dirBytes(logDir); n < 64<<10 {
			return fmt.Errorf("the broker's log %s holds %d bytes", logDir, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := dirBytes(logDir)
	killedAt := time.Now()
	pid, err := local.KillService(cfg, "kafka")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: killed the Kafka broker (pid %d) with kill -9; its log %s held %d bytes", killedAt.Sub(begin).Seconds(), pid, logDir, before)
	newPID, err := local.StartService(ctx, cfg, "kafka")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: Kafka restarted on the same log directory (pid %d), ready %.1f s after the kill",
		time.Since(begin).Seconds(), newPID, time.Since(killedAt).Seconds())
	if after := dirBytes(logDir); after < before {
		t.Errorf("the log shrank over the restart: %d bytes before, %d after", before, after)
	}

	out := awaitExperiment(ctx, t, cfg, tc, id, 6*time.Minute)
	checkExactness(t, out)
	checkReconfig(t, out, childID, faultLazySteps)
	if out.ProduceFailed != 0 {
		t.Errorf("ProduceFailed = %d, want 0: the producer must retry through the outage", out.ProduceFailed)
	}
	t.Logf("TestFaultKafkaRestart took %s", time.Since(begin).Round(time.Millisecond))
}

// dirBytes is the total size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
