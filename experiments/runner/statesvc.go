package runner

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// StateServer is a `koala statesvc` this process started for the remote
// protocol, with a fresh Pebble directory of its own.
type StateServer struct {
	// Addr is where it listens; Moved says the address asked for was held
	// by another process (left alone), so it listens on a free port.
	Addr  string
	Moved bool
	cmd   *exec.Cmd
	dir   string
	log   *os.File
}

// StartStateServer starts bin (this binary when empty) as `koala statesvc`
// on addr (a free port when empty or held by another process), with its
// directory and log under a new temporary directory in parent (the
// system's when empty), and waits until it accepts connections.
func StartStateServer(ctx context.Context, bin, addr, parent string) (*StateServer, error) {
	s := &StateServer{Addr: addr}
	if addr != "" {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			s.Addr, s.Moved = "", true // never reuse (or stop) someone else's
		}
	}
	if s.Addr == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("state server: free port: %w", err)
		}
		s.Addr = l.Addr().String()
		l.Close()
	}
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("state server: koala binary: %w", err)
		}
		bin = exe
	}
	dir, err := os.MkdirTemp(parent, "koala-statesvc-")
	if err != nil {
		return nil, fmt.Errorf("state server: %w", err)
	}
	s.dir = dir
	if s.log, err = os.Create(filepath.Join(dir, "statesvc.log")); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("state server: %w", err)
	}
	s.cmd = exec.Command(bin, "statesvc", "--listen", s.Addr, "--dir", filepath.Join(dir, "data"))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		s.log.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("state server: start %s statesvc: %w", bin, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			logName := s.log.Name()
			s.Stop()
			return nil, fmt.Errorf("state server on %s not ready within 30 s: %w (log %s)", s.Addr, cmp.Or(ctx.Err(), err), logName)
		}
		Sleep(ctx, 200*time.Millisecond)
	}
}

// PID is the server's process id.
func (s *StateServer) PID() int { return s.cmd.Process.Pid }

// Stop stops the server by its PID (SIGTERM, then SIGKILL after 10 s) and
// removes its directory.
func (s *StateServer) Stop() {
	if s == nil || s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.log.Close()
	os.RemoveAll(s.dir)
	s.cmd = nil
}
