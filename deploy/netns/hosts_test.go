package netns

// Test machinery: emulated hosts (network namespaces on a bridge) and
// processes started in them, all removed by t.Cleanup.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hostNet is a bridge in the root namespace (the "control host", address
// .1) and one namespace per worker host, each joined to the bridge by a
// veth pair.
type hostNet struct {
	bridge  string
	hostIP  string   // the root namespace's address on the bridge
	nsNames []string // one per worker host
	nsIPs   []string
	nsLinks []string // the veth end inside each namespace
}

// requireIP skips unless the test runs as root with the ip tool.
func requireIP(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds network namespaces and starts the control plane and workers")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("needs the ip tool (iproute2)")
	}
	return ip
}

// run runs a command and fails the test with its output when it fails.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// runQuiet runs a cleanup command, reporting a failure without stopping.
func runQuiet(t *testing.T, name string, args ...string) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Errorf("cleanup: %s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

// newHostNet creates n worker namespaces on a fresh bridge and subnet. Names
// and the subnet derive from the test process id so concurrent runs do not
// collide; every link and namespace is registered for removal as soon as
// it exists.
func newHostNet(t *testing.T, ip string, n int) *hostNet {
	t.Helper()
	pid := os.Getpid()
	tag := fmt.Sprintf("%04x", pid&0xffff)
	subnet := fmt.Sprintf("10.213.%d", pid%250+1)
	hn := &hostNet{bridge: "kbr" + tag, hostIP: subnet + ".1"}
	// Registered first, so it runs after every other cleanup: nothing this
	// test created may be left behind.
	t.Cleanup(func() {
		if exec.Command(ip, "link", "show", hn.bridge).Run() == nil {
			t.Errorf("bridge %s still exists after cleanup", hn.bridge)
		}
		out, _ := exec.Command(ip, "netns", "list").Output()
		for _, ns := range hn.nsNames {
			if strings.Contains(string(out), ns) {
				t.Errorf("namespace %s still exists after cleanup", ns)
			}
		}
		links, _ := exec.Command(ip, "-o", "link", "show").Output()
		if strings.Contains(string(links), "kvh"+tag) {
			t.Errorf("veth kvh%s* still exists after cleanup", tag)
		}
	})

	run(t, ip, "link", "add", hn.bridge, "type", "bridge")
	t.Cleanup(func() { runQuiet(t, ip, "link", "del", hn.bridge) })
	run(t, ip, "addr", "add", hn.hostIP+"/24", "dev", hn.bridge)
	run(t, ip, "link", "set", hn.bridge, "up")

	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("koala-%s-h%d", tag, i)
		outer, inner := fmt.Sprintf("kvh%s%d", tag, i), fmt.Sprintf("kvn%s%d", tag, i)
		addr := fmt.Sprintf("%s.%d", subnet, 10+i)

		run(t, ip, "netns", "add", ns)
		// Deleting the namespace destroys the veth end inside it, and with
		// it the pair.
		t.Cleanup(func() { runQuiet(t, ip, "netns", "del", ns) })
		run(t, ip, "link", "add", outer, "type", "veth", "peer", "name", inner)
		t.Cleanup(func() {
			if exec.Command(ip, "link", "show", outer).Run() == nil {
				runQuiet(t, ip, "link", "del", outer)
			}
		})
		run(t, ip, "link", "set", inner, "netns", ns)
		run(t, ip, "link", "set", outer, "master", hn.bridge)
		run(t, ip, "link", "set", outer, "up")
		run(t, ip, "-n", ns, "link", "set", "lo", "up")
		run(t, ip, "-n", ns, "addr", "add", addr+"/24", "dev", inner)
		run(t, ip, "-n", ns, "link", "set", inner, "up")
		hn.nsNames = append(hn.nsNames, ns)
		hn.nsIPs = append(hn.nsIPs, addr)
		hn.nsLinks = append(hn.nsLinks, inner)
	}
	return hn
}

// proc is a process the test started, stopped by PID in t.Cleanup.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

var procsMu sync.Mutex

// start runs argv (inside namespace ns unless ns is "") with env added to a
// copy of the environment without KOALA_* variables, logging to
// logDir/name.log. `ip netns exec` execs the command in place, so the PID
// is the command's own.
func start(t *testing.T, ip, logDir, name, ns string, env []string, argv ...string) *proc {
	t.Helper()
	if ns != "" {
		argv = append([]string{ip, "netns", "exec", ns}, argv...)
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM to the process group and SIGKILL after 20 s.
func (p *proc) stop(t *testing.T) {
	select {
	case <-p.done:
		return
	default:
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Logf("%s (pid %d) did not stop within 20s of SIGTERM; killing it", p.name, pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func (p *proc) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.logText(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- %s (last %d lines of %s)\n%s\n", p.name, len(lines), p.log, strings.Join(lines, "\n"))
}

func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KOALA_") {
			out = append(out, kv)
		}
	}
	return out
}

// poll calls cond every interval until it returns nil, the process list
// shows a dead process, or timeout passes.
func poll(ctx context.Context, timeout, every time.Duration, procs []*proc, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		err := cond(ctx)
		if err == nil {
			return nil
		}
		for _, p := range procs {
			if p.exited() {
				return fmt.Errorf("%s exited (%v) while waiting: %w", p.name, p.err, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

// buildKoala builds the koala binary into dir.
func buildKoala(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "koala")
	cmd := exec.Command("go", "build", "-o", bin, "koala/cmd/koala")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build koala/cmd/koala: %v\n%s", err, out)
	}
	return bin
}
