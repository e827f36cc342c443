package local

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// Fault injection for tests: kill one service of a running stack the hard
// way and start it again with the very command, environment and data files
// Up gave it.

// KillService sends SIGKILL to the process group (and every session member)
// of the service name ("controller", "temporal", "nats", "worker-w1", ...)
// and waits until all of them are gone. The PID file stays behind, stale;
// StartService (or Up) clears it. It returns the pid that was killed.
func KillService(c Config, name string) (int, error) {
	c = c.withDefaults()
	pid, err := readPID(filepath.Join(c.RunDir, name+".pid"))
	if err != nil {
		return 0, fmt.Errorf("kill %s: %w", name, err)
	}
	if !alive(pid) || !matchesRecorded(c.RunDir, name, pid) {
		return 0, fmt.Errorf("kill %s: pid %d is not running (or is not the process that was started)", name, pid)
	}
	signalAll := func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for _, m := range sessionMembers(pid) {
			_ = syscall.Kill(m, syscall.SIGKILL)
		}
	}
	signalAll()
	gone := func() bool { return !alive(pid) && len(sessionMembers(pid)) == 0 }
	if !waitFor(10*time.Second, func() bool {
		if gone() {
			return true
		}
		signalAll() // children forked meanwhile
		return false
	}) {
		return pid, fmt.Errorf("kill %s: pid %d still alive 10 s after SIGKILL (members %v)", name, pid, sessionMembers(pid))
	}
	return pid, nil
}

// StopService stops the service name gracefully (SIGTERM, then SIGKILL
// after its stop timeout) and removes its PID file, as Down does for one
// service. It returns the pid that was stopped (0 when none ran).
func StopService(c Config, name string) (int, error) {
	c = c.withDefaults()
	return stopByName(c.RunDir, name, stopTimeoutFor(name))
}

// StartService starts the service name of stack c again, with the command,
// environment and data files Up uses, unless it already runs, and waits
// until it is ready. It returns the pid.
func StartService(ctx context.Context, c Config, name string) (int, error) {
	c = c.withDefaults()
	procs, err := services(c)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	var p *process
	for _, q := range procs {
		if q.name == name {
			p = q
		}
	}
	if p == nil {
		return 0, fmt.Errorf("start %s: not a service of this stack", name)
	}
	unlock, err := lockFile(ctx, filepath.Join(c.RunDir, "stack.lock"))
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	defer unlock()
	if pid, _ := p.running(c.RunDir); pid == 0 {
		// The ports of a service that was just killed can be briefly taken:
		// the stack's ports come from the ephemeral range, so an outgoing
		// connection of any process (or a client redialing the dead
		// service, which can connect to itself) may hold one for a moment.
		if err := waitPortsFree(ctx, p.ports, 30*time.Second); err != nil {
			return 0, fmt.Errorf("start %s: %w", name, err)
		}
	}
	pid, err := upOne(ctx, c, p, true)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", name, err)
	}
	return pid, nil
}

// waitPortsFree polls until every port can be bound on Host, ctx ends or
// the timeout passes.
func waitPortsFree(ctx context.Context, ports []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var err error
		for _, port := range ports {
			if err = portFree(port); err != nil {
				break
			}
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still taken after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
