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
)

// TestFaultKafkaRestart kills the real KRaft broker (kill -9) while the
// experiment runs and starts it again with the same configuration and log
// directory: the producer and the sources (franz-go clients) reconnect, the
// records acknowledged before the crash are still there, and the
// experiment, including its reconfiguration after the restart, completes
// exactly (0 lost, 0 duplicated).
func TestFaultKafkaRestart(t *testing.T) {
	// The broker needs tens of seconds to come back on a loaded machine;
	// the reconfiguration fires after that, the input ends later still.
	f := startServiceFault(t, "kafka", 10*time.Minute, 50, 34)
	ctx, cfg, tc, id, begin := f.ctx, f.cfg, f.tc, f.id, f.begin

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
	killedAt := f.killAndRestart(t, "kafka", "the Kafka broker")
	t.Logf("%.1f s: Kafka restarted on the same log directory, ready %.1f s after the kill; its log %s held %d bytes before",
		time.Since(begin).Seconds(), time.Since(killedAt).Seconds(), logDir, before)
	if after := dirBytes(logDir); after < before {
		t.Errorf("the log shrank over the restart: %d bytes before, %d after", before, after)
	}

	out := f.finish(t, 6*time.Minute)
	if out.ProduceFailed != 0 {
		t.Errorf("ProduceFailed = %d, want 0: the producer must retry through the outage", out.ProduceFailed)
	}
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
