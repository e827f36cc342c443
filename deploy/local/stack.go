package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// services returns the processes of the stack in start order.
func services(c Config) ([]*process, error) {
	ch, err := clickhouseProcess(c)
	if err != nil {
		return nil, err
	}
	procs := []*process{ch, natsProcess(c)}
	if c.Kafka == KafkaEmbedded {
		procs = append(procs, kafkaFakeProcess(c))
	} else {
		k, err := kafkaProcess(c)
		if err != nil {
			return nil, err
		}
		procs = append(procs, k)
	}
	procs = append(procs, temporalProcess(c))
	if c.Controller {
		procs = append(procs, controllerProcess(c))
	}
	for _, id := range c.WorkerIDs() {
		procs = append(procs, workerProcess(c, id))
	}
	if c.UI {
		procs = append(procs, uiProcess(c))
	}
	return procs, nil
}

// Up installs what is missing, then starts every service that is not
// already running and waits until it is ready, in the order clickhouse,
// nats, kafka, temporal, controller, workers, ui. A service that runs with
// other settings than c asks for is an error (run Down first).
func Up(ctx context.Context, c Config) error {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if err := checkKoalaBinary(c.KoalaBinary); err != nil {
		return fmt.Errorf("up: KoalaBinary: %w", err)
	}
	if err := Install(ctx, c); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, filepath.Join(c.RunDir, "stack.lock"))
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	defer unlock()
	procs, err := services(c)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	var workers []*process
	var workerPIDs []int
	var ui *process
	for _, p := range procs {
		if p.name == "ui" {
			ui = p // after the workers, which it shows
			continue
		}
		isWorker := strings.HasPrefix(p.name, "worker-")
		pid, err := upOne(ctx, c, p, !isWorker)
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		if isWorker {
			workers, workerPIDs = append(workers, p), append(workerPIDs, pid)
		}
	}
	// Workers start together and are checked together with one ping loop.
	if err := waitWorkers(ctx, c, workers, workerPIDs, 30*time.Second); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	if ui != nil {
		if _, err := upOne(ctx, c, ui, true); err != nil {
			return fmt.Errorf("up: %w", err)
		}
	}
	return nil
}

// upOne starts p unless it already runs, and (when wait) waits until ready.
func upOne(ctx context.Context, c Config, p *process, wait bool) (int, error) {
	if pid, stale := p.running(c.RunDir); pid != 0 {
		if stale {
			return 0, fmt.Errorf("%s already runs (pid %d) with other settings than requested; run `koala stack down` first", p.name, pid)
		}
		if wait {
			if err := p.waitReady(ctx, c.RunDir, pid, time.Time{}, 0); err != nil {
				return 0, err
			}
		}
		c.progressf("up: %-12s already running (pid %d) %s", p.name, pid, p.addr)
		return pid, nil
	}
	// A PID file without our live process is stale; clear it.
	if _, err := stopByName(c.RunDir, p.name, p.stopTimeout); err != nil {
		return 0, err
	}
	for _, port := range p.ports {
		if err := portFree(port); err != nil {
			return 0, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	if p.prepare != nil {
		if err := p.prepare(ctx); err != nil {
			return 0, fmt.Errorf("%s: prepare: %w", p.name, err)
		}
	}
	started := time.Now()
	pid, offset, err := p.start(c.RunDir)
	if err != nil {
		return 0, err
	}
	if !wait {
		c.progressf("up: %-12s started (pid %d) log %s", p.name, pid, p.logFile(c.RunDir))
		return pid, nil
	}
	if err := p.waitReady(ctx, c.RunDir, pid, started, offset); err != nil {
		return 0, err
	}
	c.progressf("up: %-12s ready in %s (pid %d) %s", p.name, time.Since(started).Round(time.Millisecond), pid, p.addr)
	return pid, nil
}

func checkKoalaBinary(path string) error {
	if path == "" {
		return fmt.Errorf("empty; allowed: path of a built koala binary")
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// stopOrder lists the names Down stops first, in order; any other PID
// file under the run dir is stopped after them.
var stopOrder = []string{"ui", "controller", "temporal", "kafka", "nats", "clickhouse"}

// Down stops every process a PID file under c.RunDir names, workers first,
// then the ui, the controller, temporal, kafka, nats and clickhouse, and removes
// the PID files. It sends SIGTERM, waits (polling) and then SIGKILLs.
func Down(c Config) error {
	c = c.withDefaults()
	if _, err := os.Stat(c.RunDir); os.IsNotExist(err) {
		return nil // nothing was ever started here
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	unlock, err := lockFile(ctx, filepath.Join(c.RunDir, "stack.lock"))
	if err != nil {
		return fmt.Errorf("down: %w", err)
	}
	defer unlock()
	names := pidFileNames(c.RunDir)
	var order []string
	var workers []string
	for _, n := range names {
		if strings.HasPrefix(n, "worker-") {
			workers = append(workers, n)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(workers)))
	order = append(order, workers...)
	order = append(order, stopOrder...)
	for _, n := range names {
		if !contains(order, n) {
			order = append(order, n)
		}
	}
	var errs []string
	for _, n := range order {
		if !contains(names, n) {
			continue
		}
		start := time.Now()
		pid, err := stopByName(c.RunDir, n, stopTimeoutFor(n))
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if pid != 0 {
			c.progressf("down: %-12s stopped (pid %d) in %s", n, pid, time.Since(start).Round(time.Millisecond))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("down: %s", strings.Join(errs, "; "))
	}
	return nil
}

func stopTimeoutFor(name string) time.Duration {
	switch name {
	case "kafka":
		return 30 * time.Second
	case "clickhouse":
		return 20 * time.Second
	default:
		return 15 * time.Second
	}
}

// pidFileNames lists the service names with a PID file under run.
func pidFileNames(run string) []string {
	m, _ := filepath.Glob(filepath.Join(run, "*.pid"))
	var names []string
	for _, f := range m {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".pid"))
	}
	sort.Strings(names)
	return names
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// ServiceStatus is one line of Status.
type ServiceStatus struct {
	Name    string
	PID     int
	Running bool
	Addr    string
	Log     string
}

// Status reports every configured service and any other PID file under the
// run dir. PID is the recorded pid (0 when there is no PID file); Running
// is true only when that pid is alive and is the process that was started.
func Status(c Config) []ServiceStatus {
	c = c.withDefaults()
	var out []ServiceStatus
	seen := map[string]bool{}
	add := func(name, addr string) {
		seen[name] = true
		s := ServiceStatus{Name: name, Addr: addr, Log: filepath.Join(c.RunDir, name+".log")}
		if pid, err := readPID(filepath.Join(c.RunDir, name+".pid")); err == nil {
			s.PID = pid
			s.Running = alive(pid) && matchesRecorded(c.RunDir, name, pid)
			if a := recordedAddr(c.RunDir, name); a != "" {
				s.Addr = a // what it was started with, whatever flags status got
			}
			if a, err := readPprofAddr(filepath.Join(c.RunDir, name+PprofFileSuffix)); err == nil && s.Running {
				s.Addr += ", pprof " + a
			}
		}
		out = append(out, s)
	}
	if procs, err := services(c); err == nil {
		for _, p := range procs {
			add(p.name, p.addr)
		}
	} else {
		for _, n := range []string{"clickhouse", "nats", "kafka", "temporal"} {
			add(n, "")
		}
	}
	for _, n := range pidFileNames(c.RunDir) {
		if !seen[n] {
			add(n, "")
		}
	}
	return out
}
