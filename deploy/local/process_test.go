package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func shProcess(name, script string) *process {
	return &process{
		name:  name,
		addr:  "-",
		argv:  []string{"/bin/sh", "-c", script},
		ready: func(context.Context, *process, time.Time, int64) error { return nil },
	}
}

// A stop takes down the whole session, including children that ignore
// SIGTERM, and removes the PID file.
func TestStartStopKillsChildren(t *testing.T) {
	run := t.TempDir()
	p := shProcess("sleeper", "trap '' TERM; sleep 300 & sleep 300 & echo started; wait")
	pid, offset, err := p.start(run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopByName(run, "sleeper", time.Second) })
	if !waitFor(5*time.Second, func() bool { return len(sessionMembers(pid)) >= 3 }) {
		t.Fatalf("session members %v", sessionMembers(pid))
	}
	if !logContains(p.logFile(run), offset, "started") {
		t.Errorf("log lacks output:\n%s", tailFile(p.logFile(run), 5))
	}
	if got, stale := p.running(run); got != pid || stale {
		t.Fatalf("running = %d, %v; want %d, false", got, stale, pid)
	}
	members := sessionMembers(pid)
	start := time.Now()
	stopped, err := stopByName(run, "sleeper", 500*time.Millisecond)
	if err != nil || stopped != pid {
		t.Fatalf("stop = %d, %v", stopped, err)
	}
	t.Logf("stopped %v in %s (SIGTERM ignored, so SIGKILL)", members, time.Since(start))
	for _, m := range members {
		if alive(m) {
			t.Errorf("pid %d survived", m)
		}
	}
	if _, err := os.Stat(p.pidFile(run)); !os.IsNotExist(err) {
		t.Errorf("PID file left behind: %v", err)
	}
	if got, _ := p.running(run); got != 0 {
		t.Errorf("running after stop = %d", got)
	}
}

// A PID file naming some other live process is stale: neither running
// nor killed.
func TestStalePIDFileIsNotKilled(t *testing.T) {
	run := t.TempDir()
	p := shProcess("svc", "sleep 300")
	self := os.Getpid()
	if err := os.WriteFile(p.pidFile(run), []byte(strconv.Itoa(self)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.specFile(run), []byte(p.fullSpec()), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, _ := p.running(run); pid != 0 {
		t.Fatalf("our own test process counted as running service (pid %d)", pid)
	}
	if pid, err := stopByName(run, "svc", time.Second); err != nil || pid != 0 {
		t.Fatalf("stopByName = %d, %v", pid, err)
	}
	if _, err := os.Stat(p.pidFile(run)); !os.IsNotExist(err) {
		t.Error("stale PID file not removed")
	}
}

// A changed setting makes a running process stale.
func TestRunningDetectsChangedSpec(t *testing.T) {
	run := t.TempDir()
	p := shProcess("svc", "sleep 300")
	p.spec = "port=1"
	if _, _, err := p.start(run); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopByName(run, "svc", time.Second) })
	p2 := *p
	p2.spec = "port=2"
	// /proc/<pid>/cmdline can lag the start on a loaded machine, so the
	// process may not be recognised at the first look; it must be within
	// the deadline, and as stale.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pid, stale := p2.running(run)
		if pid != 0 {
			if !stale {
				t.Fatalf("running = %d, not stale; want stale after the spec changed", pid)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("running = 0 for 10 s: the started process is never recognised")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A process that dies before it is ready fails fast with its log tail.
func TestWaitReadyReportsDeathWithLog(t *testing.T) {
	run := t.TempDir()
	p := shProcess("dier", "echo boom-marker >&2; exit 3")
	p.ready = func(context.Context, *process, time.Time, int64) error { return os.ErrNotExist }
	p.readyTimeout = 10 * time.Second
	pid, offset, err := p.start(run)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = p.waitReady(context.Background(), run, pid, start, offset)
	if err == nil {
		t.Fatal("waitReady succeeded for a dead process")
	}
	for _, want := range []string{"dier", "exited", "boom-marker", filepath.Join(run, "dier.log")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %s to notice the death", time.Since(start))
	}
	os.Remove(p.pidFile(run))
}
