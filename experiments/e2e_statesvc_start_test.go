package experiments_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"koala/experiments/runner"
)

// TestStartStateServer: the state server the bench and the soak start for
// the remote protocol listens (on a free port when the asked one is held
// by another process, which is left alone) and is gone after Stop.
func TestStartStateServer(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	svc, err := runner.StartStateServer(ctx, koalaBinary(t), held.Addr().String(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !svc.Moved || svc.Addr == held.Addr().String() {
		t.Fatalf("asked for a held address: listening on %s (moved %v)", svc.Addr, svc.Moved)
	}
	c, err := net.DialTimeout("tcp", svc.Addr, time.Second)
	if err != nil {
		svc.Stop()
		t.Fatalf("state server not reachable on %s: %v", svc.Addr, err)
	}
	c.Close()
	pid := svc.PID()
	svc.Stop()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("state server pid %d still runs after Stop", pid)
	}
}
