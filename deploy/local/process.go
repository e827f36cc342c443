package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A process is one long-running service of the stack.
type process struct {
	name string   // file stem: <run>/<name>.pid, <run>/<name>.log
	addr string   // what Status shows
	argv []string // argv[0] is the executable (a path or a name looked up in PATH)
	env  []string // added to os.Environ()
	dir  string   // working directory; default the run dir
	// spec is everything that, when changed, makes a running process stale
	// (rendered config files, env); argv is always part of it.
	spec string
	// ports that must be free before a start.
	ports []int
	// prepare runs before a start (write configs, format storage).
	prepare func(ctx context.Context) error
	// ready is one readiness probe; nil error = ready.
	ready        func(ctx context.Context, p *process, started time.Time, logOffset int64) error
	readyTimeout time.Duration
	stopTimeout  time.Duration
	// extraLogs are other log files worth showing on failure.
	extraLogs []string
}

func (p *process) pidFile(run string) string  { return filepath.Join(run, p.name+".pid") }
func (p *process) specFile(run string) string { return filepath.Join(run, p.name+".spec") }
func (p *process) logFile(run string) string  { return filepath.Join(run, p.name+".log") }

func (p *process) fullSpec() string {
	return strings.Join(p.argv, "\x00") + "\n" + p.addr + "\n" + strings.Join(p.env, "\n") + "\n" + p.spec
}

// children reaps processes this process started, so that a stopped child
// does not linger as a zombie that still answers kill -0.
var children sync.Map // pid -> chan struct{} closed on exit

func readPID(pidFile string) (int, error) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: bad pid %q", pidFile, strings.TrimSpace(string(b)))
	}
	return pid, nil
}

// procStat returns state, pgrp and session of pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, pgrp, sid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 4 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	pgrp, _ = strconv.Atoi(f[2])
	sid, _ = strconv.Atoi(f[3])
	return f[0][0], pgrp, sid, nil
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if ch, ok := children.Load(pid); ok {
		select {
		case <-ch.(chan struct{}):
			return false
		default:
		}
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	state, _, _, err := procStat(pid)
	return err == nil && state != 'Z' && state != 'X'
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// sessionMembers lists live processes in session sid (we start every
// service with setsid, so its session and process group id is its pid).
func sessionMembers(sid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, _, s, err := procStat(pid)
		if err == nil && s == sid && state != 'Z' && state != 'X' {
			out = append(out, pid)
		}
	}
	return out
}

// running returns the pid of p if its PID file names a live process whose
// command line is the one recorded when it was started (so a reused pid is
// not mistaken for ours). stale reports a running process whose settings
// differ from p's current ones.
func (p *process) running(run string) (pid int, stale bool) {
	pid, err := readPID(p.pidFile(run))
	if err != nil || !alive(pid) {
		return 0, false
	}
	if !matchesRecorded(run, p.name, pid) {
		return 0, false
	}
	spec, err := os.ReadFile(p.specFile(run))
	if err != nil {
		return pid, true
	}
	return pid, string(spec) != p.fullSpec()
}

// recordedAddr is the address recorded in <run>/<name>.spec at start.
func recordedAddr(run, name string) string {
	spec, err := os.ReadFile(filepath.Join(run, name+".spec"))
	if err != nil {
		return ""
	}
	lines := strings.SplitN(string(spec), "\n", 3)
	if len(lines) < 2 {
		return ""
	}
	return lines[1]
}

// matchesRecorded reports whether /proc/pid/cmdline is the argv recorded in
// <run>/<name>.spec at start.
func matchesRecorded(run, name string, pid int) bool {
	spec, err := os.ReadFile(filepath.Join(run, name+".spec"))
	if err != nil {
		return false
	}
	argv, _, _ := strings.Cut(string(spec), "\n")
	return strings.Join(cmdline(pid), "\x00") == argv
}

// start launches p detached (own session and process group), with stdin
// from /dev/null and stdout+stderr appended to its log file, and records
// its PID and spec. It returns the pid and the log offset where this run's
// output begins.
func (p *process) start(run string) (int, int64, error) {
	logPath := p.logFile(run)
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: open log: %w", p.name, err)
	}
	defer lf.Close()
	st, _ := lf.Stat()
	offset := st.Size()
	fmt.Fprintf(lf, "=== %s start %s: %s\n", p.name, time.Now().Format(time.RFC3339), strings.Join(p.argv, " "))
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, 0, err
	}
	defer devnull.Close()

	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	if cmd.Dir == "" {
		cmd.Dir = run
	}
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // new session => own process group, pgid == pid
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("%s: start %s: %w", p.name, p.argv[0], err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	children.Store(pid, done)
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	err = writeFileAtomic(p.specFile(run), []byte(p.fullSpec()))
	if err == nil {
		err = writeFileAtomic(p.pidFile(run), []byte(strconv.Itoa(pid)+"\n"))
	}
	if err != nil {
		_ = stopPID(pid, 2*time.Second) // no PID file: nobody could stop it later
		return 0, 0, fmt.Errorf("%s: record pid: %w", p.name, err)
	}
	return pid, offset, nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// stopPID sends SIGTERM to the process group of pid (and pid itself), polls
// until every member of its session is gone or the timeout passes, then
// sends SIGKILL and waits a little more.
func stopPID(pid int, timeout time.Duration) error {
	signalAll := func(sig syscall.Signal) {
		_ = syscall.Kill(-pid, sig)
		_ = syscall.Kill(pid, sig)
		for _, m := range sessionMembers(pid) { // children that left the group
			_ = syscall.Kill(m, sig)
		}
	}
	gone := func() bool { return !alive(pid) && len(sessionMembers(pid)) == 0 }
	if gone() {
		return nil
	}
	signalAll(syscall.SIGTERM)
	if waitFor(timeout, gone) {
		return nil
	}
	signalAll(syscall.SIGKILL)
	if waitFor(5*time.Second, gone) {
		return nil
	}
	return fmt.Errorf("pid %d still alive after SIGKILL (members %v)", pid, sessionMembers(pid))
}

func waitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopByName stops the process named by <run>/<name>.pid if it is ours and
// removes its PID and spec files.
func stopByName(run, name string, timeout time.Duration) (int, error) {
	pidFile := filepath.Join(run, name+".pid")
	pid, err := readPID(pidFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		os.Remove(pidFile)
		return 0, nil
	}
	var stopErr error
	switch {
	case alive(pid) && matchesRecorded(run, name, pid):
		stopErr = stopPID(pid, timeout)
	case !alive(pid) && len(sessionMembers(pid)) > 0:
		// The leader died but processes of its session remain: they are ours
		// (a session id equals the pid of the process that created it).
		stopErr = stopPID(pid, timeout)
	default:
		pid = 0 // stale PID file, or the pid was reused by someone else
	}
	if stopErr != nil {
		return pid, fmt.Errorf("stop %s: %w", name, stopErr)
	}
	os.Remove(pidFile)
	os.Remove(filepath.Join(run, name+".spec"))
	os.Remove(filepath.Join(run, name+PprofFileSuffix)) // a worker's, if it could not remove it itself
	return pid, nil
}

// waitReady polls p.ready until it succeeds, the process dies, the timeout
// passes or ctx ends. Errors name the service and address and carry the
// tail of its logs.
func (p *process) waitReady(ctx context.Context, run string, pid int, started time.Time, offset int64) error {
	timeout := p.readyTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	begin := time.Now()
	var last error
	for {
		probeCtx, pc := context.WithTimeout(ctx, 3*time.Second)
		last = p.ready(probeCtx, p, started, offset)
		pc()
		if last == nil {
			return nil
		}
		if !alive(pid) {
			return p.failure(run, fmt.Errorf("process %d exited before it was ready (last probe: %v)", pid, last))
		}
		select {
		case <-ctx.Done():
			return p.failure(run, fmt.Errorf("not ready after %s: %w", time.Since(begin).Round(time.Millisecond), last))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *process) failure(run string, err error) error {
	var b strings.Builder
	for _, f := range append([]string{p.logFile(run)}, p.extraLogs...) {
		if t := tailFile(f, 20); t != "" {
			fmt.Fprintf(&b, "\n--- last lines of %s:\n%s", f, t)
		}
	}
	return fmt.Errorf("%s (%s): %w%s", p.name, p.addr, err, b.String())
}

// tailFile returns the last n lines of a file (reading at most 64 KiB).
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	const max = 64 << 10
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && len(buf) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// portFree reports an error if something already listens on 127.0.0.1:port.
func portFree(port int) error {
	ln, err := net.Listen("tcp", hostPort(port))
	if err != nil {
		return fmt.Errorf("%s is already in use by a process not started under this run dir: %w", hostPort(port), err)
	}
	return ln.Close()
}

// tcpOpen is a readiness probe: a TCP connect succeeds.
func tcpOpen(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// lockFile takes an exclusive flock on path (creating it), waiting while
// another koala process holds it, so that concurrent Up/Down/Install calls
// on the same directories do not interleave. The returned func unlocks.
func lockFile(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s (held by another koala stack command): %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
