package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWorkerPprofEndpoints reads the run dir's address files: a live
// worker with a good file, one without a file, one with a bad file, and a
// stale PID file (dead process) that is left out.
func TestWorkerPprofEndpoints(t *testing.T) {
	run := t.TempDir()
	live := os.Getpid()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(run, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("worker-w1.pid", strconv.Itoa(live)+"\n")
	write("worker-w1.pprof", "127.0.0.1:41234\n")
	write("worker-w2.pid", strconv.Itoa(live)+"\n") // no address file
	write("worker-w3.pid", strconv.Itoa(live)+"\n")
	write("worker-w3.pprof", "127.0.0.1:0\n") // not a bound port
	write("worker-w4.pid", strconv.Itoa(dead.Process.Pid)+"\n")
	write("worker-w4.pprof", "127.0.0.1:41235\n")

	eps, err := WorkerPprofEndpoints(run)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 3 {
		t.Fatalf("endpoints %+v: want w1, w2, w3 (w4's process is gone)", eps)
	}
	for i, want := range []struct{ id, addr, why string }{
		{"w1", "127.0.0.1:41234", ""},
		{"w2", "", "--worker-pprof"},
		{"w3", "", "not a bound host:port"},
	} {
		ep := eps[i]
		if ep.ID != want.id || ep.PID != live || ep.Addr != want.addr {
			t.Errorf("endpoint %d: %+v, want id %s addr %q pid %d", i, ep, want.id, want.addr, live)
		}
		if (want.why == "") != (ep.Why == "") || !strings.Contains(ep.Why, want.why) {
			t.Errorf("endpoint %s: why %q, want it to contain %q", ep.ID, ep.Why, want.why)
		}
	}
	if got := PprofAddrFile(run, "w1"); got != filepath.Join(run, "worker-w1.pprof") {
		t.Errorf("PprofAddrFile = %s", got)
	}
}

// TestStopByNameRemovesPprofFile: a worker that was killed cannot remove
// its address file; stopping it by name does.
func TestStopByNameRemovesPprofFile(t *testing.T) {
	run := t.TempDir()
	p := shProcess("worker-w9", "sleep 60")
	pid, _, err := p.start(run)
	if err != nil {
		t.Fatal(err)
	}
	addrFile := PprofAddrFile(run, "w9")
	if err := os.WriteFile(addrFile, []byte("127.0.0.1:41236\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /proc/<pid>/cmdline can lag the start on a loaded machine (start
	// returns once the child is in exec, before its new arguments are in
	// place), and stopByName would then take the PID file for a stale one:
	// it did under make test's load. Wait until the process is recognised.
	deadline := time.Now().Add(10 * time.Second)
	for !matchesRecorded(run, "worker-w9", pid) {
		if time.Now().After(deadline) {
			t.Fatal("the started process is not recognised after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, err := stopByName(run, "worker-w9", 5*time.Second); err != nil || got != pid {
		t.Fatalf("stopByName: pid %d, %v; want %d", got, err, pid)
	}
	if _, err := os.Stat(addrFile); !os.IsNotExist(err) {
		t.Errorf("%s still there after stop: %v", addrFile, err)
	}
}
