package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/workflows"
)

// `koala bench` is what `make bench` runs: hot-path micro-benchmarks (go test
// -bench), steady state per core of a stateless and a keyed query, and the
// per-protocol disruption of a 2→4 scale-out (the `koala compare` machinery),
// then BENCHMARKS.md and results/bench/.

type benchOpts struct {
	temporalAddr, namespace, kafka, clickhouse, uiURL string
	runDir, resultsDir, mdPath                        string

	microPkgs, microRegex, benchtime string

	helloConfig, counterConfig string
	helloRate, counterRate     int
	steadySec                  int

	disruptionConfig, protocols string
	statesvcAddr                string
	gap, flushWait, margin      time.Duration

	skipMicro, skipSteady, skipDisruption bool
}

func init() {
	var o benchOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the benchmark suite against the local stack and write BENCHMARKS.md and results/bench/",
		Long: `bench runs, in this order:

 1. the hot-path testing.B benchmarks (frame codec, BucketOf, outputs
    batching, KLT lookup and size, Pebble multi-get+put) with go test -bench,
    when the go toolchain is on PATH;
 2. steady state per core: the hello (stateless) and counter (keyed, Pebble)
    queries without reconfiguration at a fixed rate; sink events/s from
    ClickHouse divided by the utime+stime of all worker processes
    (<run-dir>/worker-w*.pid) over the same window, plus per-batch latency;
 3. disruption per protocol: the koala compare machinery on the 2→4 counter
    scale-out for lazy, stop-and-restart, remote (against a koala statesvc it
    starts and stops itself) and drrs.

It needs the local stack (koala stack up) and writes BENCHMARKS.md and raw
JSON under results/bench/.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runBench(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&o.namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&o.kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers (env "+envKafka+")")
	f.StringVar(&o.clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL (env "+envClickHouse+")")
	f.StringVar(&o.uiURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL (env "+envTemporalUI+")")
	f.StringVar(&o.runDir, "run-dir", "", "run directory of the local stack, for the worker PID files (default $KOALA_HOME/run or .koala/run)")
	f.StringVar(&o.resultsDir, "results", "results/bench", "directory for the raw JSON")
	f.StringVar(&o.mdPath, "out", "BENCHMARKS.md", "markdown report")
	f.StringVar(&o.microPkgs, "micro-packages", "./dataplane,./statesvc", "packages whose benchmarks run (comma-separated)")
	f.StringVar(&o.microRegex, "micro-bench", "Frame|BucketOf|OutputsBatching|KLTLookup|KLTMemory|PebbleMultiGetPut$", "go test -bench regexp")
	f.StringVar(&o.benchtime, "benchtime", "1s", "go test -benchtime")
	f.StringVar(&o.helloConfig, "hello-config", "experiments/bench/hello-steady.json", "steady-state config of the stateless query")
	f.StringVar(&o.counterConfig, "counter-config", "experiments/bench/counter-steady.json", "steady-state config of the keyed query")
	f.IntVar(&o.helloRate, "hello-rate", 0, "producer rate of the stateless run (0: the config's)")
	f.IntVar(&o.counterRate, "counter-rate", 0, "producer rate of the keyed run (0: the config's)")
	f.IntVar(&o.steadySec, "steady-seconds", 0, "runtime of each steady-state run (0: the config's)")
	f.StringVar(&o.disruptionConfig, "disruption-config", "experiments/bench/counter-lazy-2to4.json", "scale-out experiment compared across protocols")
	f.StringVar(&o.protocols, "protocols", strings.Join(experiments.CompareVariants, ","), "protocols of the disruption phase")
	f.StringVar(&o.statesvcAddr, "statesvc-listen", "127.0.0.1:7600", "address of the koala statesvc started for the remote protocol (empty: skip remote)")
	f.DurationVar(&o.gap, "gap", 5*time.Second, "pause between two runs")
	f.DurationVar(&o.flushWait, "flush-wait", 3*time.Second, "wait after a run before reading its metrics")
	f.DurationVar(&o.margin, "timeout-margin", 3*time.Minute, "a run is given up this long after its runtime + drain timeout")
	f.BoolVar(&o.skipMicro, "skip-micro", false, "skip the go test benchmarks")
	f.BoolVar(&o.skipSteady, "skip-steady", false, "skip the steady-state runs")
	f.BoolVar(&o.skipDisruption, "skip-disruption", false, "skip the protocol comparison")
	rootCmd.AddCommand(cmd)
}

func runBench(ctx context.Context, o benchOpts) error {
	if o.runDir == "" {
		home := envOr(envHome, ".koala")
		o.runDir = filepath.Join(home, "run")
	}
	rep := experiments.BenchReport{Started: time.Now(), Machine: machineText(), Load: loadAvg()}
	stamp := rep.Started.Format("20060102-150405")
	rep.Notes = append(rep.Notes, fmt.Sprintf("stack run dir %s; the local stack (Temporal, NATS, Kafka, ClickHouse, controller, %d workers) shares the machine with the measured workers and with anything else running on it", o.runDir, len(workerPIDs(o.runDir))))
	rep.Notes = append(rep.Notes, "steady-state rates (configs experiments/bench/hello-steady.json, counter-steady.json) were picked by probing this 2-core machine on 2026-11-29 with the same harness: "+
		"hello with one producer was producer-bound at ~48 K ev/s (100 K offered), with two producers ~67 K ev/s produced / ~62 K at the sink (80 K offered); "+
		"counter's sink saturated at ~19 K ev/s (40 K offered: 32.5 K produced, 18.8 K at the sink, backlog growing), so 20 K is its ceiling here and the 10 K of the disruption config is ~50 % of it")
	fmt.Printf("koala bench %s: run dir %s, results %s\n", stamp, o.runDir, o.resultsDir)

	var rawMicro string
	phaseLoad := func(phase string) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("load average at the start of %s: %s", phase, loadAvg()))
	}
	if !o.skipMicro {
		phaseLoad("micro-benchmarks")
		t0 := time.Now()
		rawMicro = benchMicro(ctx, o, &rep)
		rep.MicroSec = time.Since(t0).Seconds()
	}

	var tc client.Client
	if !o.skipSteady || !o.skipDisruption {
		var err error
		tc, err = dialTemporal(ctx, o.temporalAddr, o.namespace)
		if err != nil {
			return err
		}
		defer tc.Close()
	}
	var ch *metrics.ClickHouse
	if o.clickhouse != "" && o.clickhouse != "none" {
		ch = metrics.NewClickHouse(o.clickhouse, "koala")
	}

	if !o.skipSteady && ctx.Err() == nil {
		phaseLoad("steady state")
		t0 := time.Now()
		for i, c := range []struct {
			query, cfg, op string
			rate           int
			target         float64
		}{
			{"hello", o.helloConfig, "mapper", o.helloRate, experiments.TargetStatelessPerCore},
			{"counter", o.counterConfig, "counter", o.counterRate, experiments.TargetKeyedPerCore},
		} {
			if i > 0 {
				sleepCtx(ctx, o.gap)
			}
			if ctx.Err() != nil {
				break
			}
			s := benchSteady(ctx, o, tc, ch, c.cfg, c.op, c.rate, c.target, stamp)
			rep.Steady = append(rep.Steady, s)
		}
		rep.SteadySec = time.Since(t0).Seconds()
	}

	if !o.skipDisruption && ctx.Err() == nil {
		phaseLoad("disruption")
		t0 := time.Now()
		sleepCtx(ctx, o.gap)
		cmp, dir, err := benchDisruption(ctx, o, tc, ch, stamp, &rep.Notes)
		if err != nil {
			rep.Notes = append(rep.Notes, "disruption: "+err.Error())
		}
		rep.Disruption, rep.DisruptionDir = cmp, dir
		rep.DisruptionSec = time.Since(t0).Seconds()
	}

	rep.Finished = time.Now()
	rep.LoadEnd = loadAvg()
	paths, werr := rep.WriteFiles(o.resultsDir, o.mdPath, rawMicro)
	// A copy stamped with the run, so earlier runs stay comparable.
	if werr == nil {
		if more, err := rep.WriteFiles(filepath.Join(o.resultsDir, "run-"+stamp), "", rawMicro); err == nil {
			paths = append(paths, more...)
		}
	}
	fmt.Println()
	fmt.Println("targets")
	for _, t := range rep.Targets() {
		fmt.Printf("  %-8s %s: %s\n", t.Verdict, t.Target, t.Measured)
	}
	fmt.Printf("\nbench took %.1f min (micro %.0f s, steady %.0f s, disruption %.0f s)\n",
		rep.Finished.Sub(rep.Started).Minutes(), rep.MicroSec, rep.SteadySec, rep.DisruptionSec)
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	if werr != nil {
		return werr
	}
	if rep.Disruption != nil {
		if v := rep.Disruption.Violations(); len(v) > 0 {
			return fmt.Errorf("EXACTNESS VIOLATED: %s", strings.Join(v, "; "))
		}
	}
	for _, s := range rep.Steady {
		if s.Lost != 0 || s.Duplicated != 0 {
			return fmt.Errorf("EXACTNESS VIOLATED in steady %s: lost=%d duplicated=%d", s.Query, s.Lost, s.Duplicated)
		}
	}
	return ctx.Err()
}

// benchMicro runs the testing.B benchmarks with the go toolchain. They are
// run as `go test -bench` rather than through testing.Benchmark inside this
// binary so that the numbers are exactly those a developer gets from
// `go test -bench` on the same files (one source of truth; the outputs
// batching benchmark needs package-internal types anyway). The binary under
// test is built from the same tree as bin/koala.
func benchMicro(ctx context.Context, o benchOpts, rep *experiments.BenchReport) string {
	goBin, err := exec.LookPath(envOr("GO", "go"))
	if err != nil {
		rep.MicroError = "go toolchain not on PATH: micro-benchmarks skipped"
		fmt.Println("micro:", rep.MicroError)
		return ""
	}
	args := []string{"test", "-count=1", "-run", "^$", "-bench", o.microRegex, "-benchtime", o.benchtime, "-timeout", "15m"}
	args = append(args, splitList(o.microPkgs)...)
	rep.MicroCommand = "go " + strings.Join(quoteArgs(args), " ")
	fmt.Println("micro:", rep.MicroCommand)
	cmd := exec.CommandContext(ctx, goBin, args...)
	out, err := cmd.CombinedOutput()
	rep.Micro = experiments.ParseGoBench(string(out))
	if err != nil {
		rep.MicroError = fmt.Sprintf("go test: %v: %s", err, lastLines(string(out), 5))
	}
	for _, m := range rep.Micro {
		fmt.Printf("  %-45s %12.0f ns/op\n", m.Name, m.Metrics["ns/op"])
	}
	return string(out)
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, "|$^ ") {
			a = "'" + a + "'"
		}
		out[i] = a
	}
	return out
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " / ")
}

// benchSteady runs one query without reconfiguration and measures it.
func benchSteady(ctx context.Context, o benchOpts, tc client.Client, ch *metrics.ClickHouse, cfg, op string, rate int, target float64, stamp string) experiments.Steady {
	s := experiments.Steady{Operator: op, Target: target, Status: experiments.StatusFailed}
	in, err := experiments.LoadConfig(cfg)
	if err != nil {
		s.Reason = err.Error()
		fmt.Println("steady:", s.Reason)
		return s
	}
	if len(in.KafkaBrokers) == 0 {
		in.KafkaBrokers = splitList(o.kafka)
	}
	if rate > 0 {
		in.Producer.RatePerSec = rate
	}
	if o.steadySec > 0 {
		in.TotalRuntimeSeconds = o.steadySec
	}
	in.Reconfigurations = nil
	s.Query, s.Backend, s.Rate, s.RuntimeSec = in.QueryName, in.StateBackend, in.Producer.RatePerSec, in.TotalRuntimeSeconds
	label := "[steady " + in.QueryName + "]"
	if ch == nil {
		s.Reason = "no ClickHouse"
		return s
	}

	pids := workerPIDs(o.runDir)
	if len(pids) == 0 {
		s.Reason = "no worker PID files under " + o.runDir
		fmt.Println(label, s.Reason)
		return s
	}
	s.WorkerPIDs = pids
	sampler := startCPUSampler(pids, 500*time.Millisecond)

	id := fmt.Sprintf("%s-%s", in.Name, stamp)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		sampler.stop()
		s.Reason = fmt.Sprintf("start workflow %s: %v", id, err)
		fmt.Println(label, s.Reason)
		return s
	}
	s.WorkflowID = run.GetID()
	fmt.Printf("%s started %s: %s at %d ev/s for %d s, %d worker processes %v\n", label, id, in.QueryName, s.Rate, s.RuntimeSec, len(pids), pids)
	drain := in.DrainTimeoutSeconds
	if drain <= 0 {
		drain = experiments.DefaultDrainTimeoutSeconds
	}
	limit := time.Duration(in.TotalRuntimeSeconds+drain)*time.Second + o.margin
	res, err := followVariant(ctx, run, label, in.TotalRuntimeSeconds, limit)
	samples := sampler.stop()
	if err != nil {
		if errors.Is(err, errGaveUp) {
			tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = tc.TerminateWorkflow(tctx, run.GetID(), run.GetRunID(), "koala bench: run exceeded its time limit")
			cancel()
		}
		s.Reason = err.Error()
		fmt.Println(label, "failed:", s.Reason)
		return s
	}
	writeRawResult(o.resultsDir, "steady-"+in.QueryName, res)
	s.JobID, s.Produced, s.Lost, s.Duplicated = res.JobID, res.Produced, res.Lost, res.Duplicated
	if in.TotalRuntimeSeconds > 0 {
		s.ProducedPerSec = float64(res.Produced) / float64(in.TotalRuntimeSeconds)
	}
	sleepCtx(ctx, o.flushWait)

	jobStart, err := ch.JobStart(ctx, res.JobID)
	if err != nil {
		s.Reason = "job start: " + err.Error()
		return s
	}
	sink := "sink"
	if ops := res.Final.Job.Operators; len(ops) > 0 {
		sink = ops[len(ops)-1].Name
	}
	var sin experiments.SteadyInputs
	var errs []string
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, what+": "+err.Error())
		}
	}
	sin.Sink, err = ch.Throughput(ctx, res.JobID, sink)
	note("sink", err)
	sin.Lag, err = ch.Lag(ctx, res.JobID)
	note("lag", err)
	sin.BatchAvg, err = ch.ColumnByTask(ctx, res.JobID, op, "batch_time_avg_us", metrics.AggMax)
	note("batch avg", err)
	sin.BatchMax, err = ch.ColumnByTask(ctx, res.JobID, op, "batch_time_max_us", metrics.AggMax)
	note("batch max", err)
	if len(errs) > 0 {
		s.Reason = strings.Join(errs, "; ")
		return s
	}
	// Window: after the warm-up, until the producer stopped (minus one second
	// for the last partial second), on the job's metric axis.
	offset := 0.0
	if !res.StartedAt.IsZero() {
		offset = res.StartedAt.Sub(jobStart).Seconds()
	}
	sin.JobStart, sin.CPU, sin.TargetRate = jobStart, samples, s.Rate
	sin.From = float64(int(offset + experiments.CompareWarmupSec + 2)) // whole seconds
	sin.To = float64(int(offset + float64(in.TotalRuntimeSeconds) - 1))
	s = experiments.ComputeSteady(s, sin)
	s.Status = experiments.StatusOK
	if s.CPUSeconds <= 0 {
		s.Reason = "no CPU samples over the window"
	}
	fmt.Printf("%s produced %.0f ev/s, %.0f ev/s at the sink (%.0f %% of %d), %.1f worker CPU-s over %.0f s = %.2f cores (machine busy %.2f cores) → %.0f ev/s per CPU-s; batch p50 %.2f ms p99 %.2f ms; lost=%d dup=%d\n",
		label, s.ProducedPerSec, s.EventsPerSec, 100*s.SustainedRatio, s.Rate, s.CPUSeconds, s.WindowTo-s.WindowFrom, s.CoresUsed, s.MachineCores, s.EventsPerCPUSec,
		s.BatchP50Us/1000, s.BatchP99Us/1000, s.Lost, s.Duplicated)
	return s
}

// benchDisruption runs the protocol comparison with the compare machinery,
// starting a remote state server for the remote protocol.
func benchDisruption(ctx context.Context, o benchOpts, tc client.Client, ch *metrics.ClickHouse, stamp string, notes *[]string) (*experiments.Comparison, string, error) {
	variants, err := experiments.ParseVariants(o.protocols)
	if err != nil {
		return nil, "", err
	}
	base, err := experiments.LoadConfig(o.disruptionConfig)
	if err != nil {
		return nil, "", err
	}
	if len(base.KafkaBrokers) == 0 {
		base.KafkaBrokers = splitList(o.kafka)
	}
	dir := filepath.Join(o.resultsDir, "compare-"+stamp)
	cmp := &experiments.Comparison{Experiment: base.Name, Config: o.disruptionConfig, Started: time.Now()}
	remote := ""
	var svc *exec.Cmd
	var svcNote error
	for i, v := range variants {
		if ctx.Err() != nil {
			break
		}
		if i > 0 {
			sleepCtx(ctx, o.gap)
		}
		if v == experiments.VariantRemote && o.statesvcAddr != "" && svc == nil {
			var addr string
			svc, addr, svcNote = startStateSvc(ctx, o.statesvcAddr)
			if svcNote == nil {
				remote = addr
				if addr != o.statesvcAddr {
					*notes = append(*notes, fmt.Sprintf("remote protocol: %s was held by another process (left alone), so the harness ran its own koala statesvc on %s", o.statesvcAddr, addr))
				}
			} else {
				fmt.Println("disruption: remote state server:", svcNote)
			}
		}
		label := fmt.Sprintf("[disruption %d/%d %s]", i+1, len(variants), v)
		row := runVariant(ctx, tc, ch, base, v, remote, stamp, label, o.uiURL, o.namespace, dir, o.flushWait, o.margin)
		if v == experiments.VariantRemote && svcNote != nil && row.Status == experiments.StatusSkipped {
			row.Reason += " (starting koala statesvc failed: " + svcNote.Error() + ")"
		}
		cmp.Rows = append(cmp.Rows, row)
		if v == experiments.VariantRemote && svc != nil {
			stopStateSvc(svc)
			svc = nil
		}
	}
	if svc != nil {
		stopStateSvc(svc)
	}
	fmt.Println()
	_ = cmp.WriteTable(os.Stdout)
	if _, err := cmp.WriteFiles(dir); err != nil {
		return cmp, dir, err
	}
	return cmp, dir, nil
}

// startStateSvc starts `koala statesvc` (this binary) on addr with a fresh
// temporary Pebble directory and waits until it accepts connections.
func startStateSvc(ctx context.Context, addr string) (*exec.Cmd, string, error) {
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		// Someone else's process holds the port: never reuse (or stop) it;
		// run ours on a free port instead.
		l, lerr := net.Listen("tcp", "127.0.0.1:0")
		if lerr != nil {
			return nil, "", fmt.Errorf("%s is in use and no free port: %v", addr, lerr)
		}
		free := l.Addr().String()
		l.Close()
		fmt.Printf("disruption: %s is in use by another process (left alone); starting our own state server on %s\n", addr, free)
		addr = free
	}
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "koala-bench-statesvc-")
	if err != nil {
		return nil, "", err
	}
	logf, err := os.Create(filepath.Join(dir, "statesvc.log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, "statesvc", "--listen", addr, "--dir", filepath.Join(dir, "pebble"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, "", err
	}
	fmt.Printf("disruption: started koala statesvc pid %d on %s (dir %s)\n", cmd.Process.Pid, addr, dir)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
			c.Close()
			return cmd, addr, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopStateSvc(cmd)
	return nil, "", fmt.Errorf("koala statesvc did not listen on %s within 20 s (log %s)", addr, logf.Name())
}

// stopStateSvc stops the state server we started, by its PID, and removes
// its temporary directory.
func stopStateSvc(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	if n := len(cmd.Args); n > 0 {
		if d := cmd.Args[n-1]; strings.Contains(d, "koala-bench-statesvc-") {
			_ = os.RemoveAll(filepath.Dir(d))
		}
	}
	fmt.Printf("disruption: stopped koala statesvc pid %d\n", pid)
}

// workerPIDs reads <runDir>/worker-*.pid.
func workerPIDs(runDir string) []int {
	files, _ := filepath.Glob(filepath.Join(runDir, "worker-*.pid"))
	sort.Strings(files)
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

type cpuSampler struct {
	mu      sync.Mutex
	samples []experiments.CPUSample
	done    chan struct{}
	wg      sync.WaitGroup
}

// startCPUSampler records the summed utime+stime of pids every interval.
// A process that cannot be read counts its last value (a worker that exited
// used no more CPU).
func startCPUSampler(pids []int, interval time.Duration) *cpuSampler {
	s := &cpuSampler{done: make(chan struct{})}
	last := make([]float64, len(pids))
	take := func() {
		var sum float64
		for i, pid := range pids {
			if v, err := experiments.ProcCPUSeconds(pid); err == nil {
				last[i] = v
			}
			sum += last[i]
		}
		busy, _ := experiments.MachineBusySeconds()
		s.mu.Lock()
		s.samples = append(s.samples, experiments.CPUSample{At: time.Now(), Seconds: sum, MachineBusy: busy})
		s.mu.Unlock()
	}
	take()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				take()
				return
			case <-t.C:
				take()
			}
		}
	}()
	return s
}

func (s *cpuSampler) stop() []experiments.CPUSample {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

func machineText() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				f := strings.Fields(l)
				if len(f) >= 2 {
					if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
						mem = fmt.Sprintf(", %.1f GB RAM", kb/1024/1024)
					}
				}
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
