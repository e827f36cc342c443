package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/client"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/experiments/cpuprof"
	"koala/experiments/hostcpu"
	"koala/workflows"
)

// Services are the clients and links a run needs. ClickHouse may be nil:
// the summaries then use the workflow's own series.
type Services struct {
	Temporal   client.Client
	ClickHouse *metrics.ClickHouse
	Namespace  string
	UIURL      string // Temporal web UI base URL, for links
	Brokers    []string
	// KeepTopics keeps a finished run's Kafka topics; by default they are
	// dropped once its results are read (DropRunTopics).
	KeepTopics bool
}

// VariantRun says how one protocol's run is started and read back.
type VariantRun struct {
	Base         workflows.ExperimentInput
	Variant      string
	RemotePebble string // remote state server list for the remote protocol
	Stamp        string // the comparison's time stamp, part of the workflow id
	Label        string // prefix of the progress lines
	Dir          string // where the raw result is kept
	FlushWait    time.Duration
	Margin       time.Duration // a run is given up this long after runtime + drain timeout
	// Terminator names the command in the reason a given-up workflow is
	// terminated with.
	Terminator string
	// DrainLag is the lag of the pipeline keeping up, from a rate probe (0:
	// derived from the run, experiments.RunSeries.DrainLag).
	DrainLag float64
	// Profiler takes the workers' CPU profiles around the trigger (nil:
	// none; compare_profile.go).
	Profiler *profiler
}

// CompareOptions configure Compare.
type CompareOptions struct {
	Services
	Config       string // path of the experiment config
	Protocols    string
	ResultsDir   string
	RemotePebble string
	// StateServerBinary is the koala binary started as `koala statesvc`
	// when the remote protocol has no server (this binary when empty).
	StateServerBinary string
	Gap               time.Duration // pause between two runs
	FlushWait         time.Duration
	Margin            time.Duration
	// DialNATS connects to the workers' NATS, for the progress of a
	// warm-up that builds the config's missing snapshot (BuildOptions).
	DialNATS func() (*nats.Conn, error)
	// Overload, when > 0, first probes the rate the config's pre-scale
	// pipeline sustains (a staircase ProbeFrom × ProbeFactor per step up
	// to ProbeMax, ProbeStepSec each) and runs every protocol at Overload
	// × that rate, so a backlog builds up before the reconfiguration.
	Overload     float64
	ProbeFrom    int
	ProbeFactor  float64
	ProbeMax     int
	ProbeStepSec int
	// Profile, when set, takes every worker's CPU profile before and
	// after each run's first trigger (koala compare --profile).
	Profile *ProfileOptions
}

// Limits of CompareOptions.Overload.
const (
	MinOverload = 1.0
	MaxOverload = 3.0
)

// validateOverload checks the overload options.
func (o CompareOptions) validateOverload() ([]int, error) {
	if o.Overload == 0 {
		return nil, nil
	}
	if !(o.Overload >= MinOverload && o.Overload <= MaxOverload) {
		return nil, fmt.Errorf("--overload %v: want a multiple of the probed rate from %.1f to %.1f (0: no probe, the config's rate)", o.Overload, MinOverload, MaxOverload)
	}
	if o.ProbeStepSec < 3 {
		return nil, fmt.Errorf("--probe-step %d s: want at least 3 s (each step skips its first %d s)", o.ProbeStepSec, ProbeSettleSec)
	}
	rates, err := ProbeRates(o.ProbeFrom, o.ProbeFactor, o.ProbeMax)
	if err != nil {
		return nil, fmt.Errorf("--probe-from/--probe-factor/--probe-max: %w", err)
	}
	return rates, nil
}

// Compare runs the experiment once per protocol, one after another, and
// writes the comparison under ResultsDir/compare-<stamp>/.
func Compare(ctx context.Context, o CompareOptions) error {
	_, _, err := compare(ctx, o)
	return err
}

// checkCompare checks o's protocols, overload options and config, as
// compare does before it runs anything.
func checkCompare(o CompareOptions) ([]string, []int, workflows.ExperimentInput, error) {
	variants, err := experiments.ParseVariants(o.Protocols)
	if err != nil {
		return nil, nil, workflows.ExperimentInput{}, err
	}
	rates, err := o.validateOverload()
	if err != nil {
		return nil, nil, workflows.ExperimentInput{}, err
	}
	base, err := experiments.LoadConfig(o.Config)
	if err == nil && o.Profile != nil {
		err = o.Profile.Validate(base)
	}
	return variants, rates, base, err
}

// compare is Compare, returning the comparison and the directory it was
// written to (empty when it stopped before it had one).
func compare(ctx context.Context, o CompareOptions) (experiments.Comparison, string, error) {
	variants, rates, base, err := checkCompare(o)
	if err != nil {
		return experiments.Comparison{}, "", err
	}
	DefaultBrokers(&base, o.Brokers)
	var snap *experiments.SnapshotRead
	if base.Params[control.ParamLoadWarmUpData] == "true" {
		if snap, err = ensureWarmUp(ctx, o); err != nil {
			return experiments.Comparison{}, "", err
		}
	}
	started := time.Now()
	stamp := started.Format("20060102-150405")
	dir := filepath.Join(o.ResultsDir, "compare-"+stamp)
	cmp := experiments.Comparison{Experiment: base.Name, Config: o.Config, Started: started, Snapshot: snap}
	var prof *profiler
	if o.Profile != nil {
		if prof, err = newProfiler(*o.Profile, base, dir); err != nil {
			return cmp, "", err
		}
		cmp.ProfileCategories = cpuprof.Names(cpuprof.WorkerCategories)
		fmt.Printf("  profile: %d workers' CPU, %d s ending 1 s before each run's first trigger and %d s from each of %v s after it, into %s\n",
			len(prof.endpoints), o.Profile.Seconds, o.Profile.Seconds, o.Profile.After, prof.dir)
	}
	fmt.Printf("comparing %s: %s (%d s each)\n  results: %s\n", base.Name, strings.Join(variants, ", "), base.TotalRuntimeSeconds, dir)
	var drainLag float64
	if rates != nil {
		load := overloadProbe(ctx, o, &base, rates, stamp, dir)
		cmp.Load, drainLag = &load, load.DrainLag
		if ctx.Err() != nil {
			return cmp, dir, ctx.Err()
		}
		if load.Error != "" {
			// Running at the config's rate would not be the overload asked for.
			return cmp, dir, fmt.Errorf("--overload %v: the rate probe did not find the limit of the pre-scale pipeline: %s (--probe-from, --probe-max; probe result under %s)", o.Overload, load.Error, dir)
		}
		Sleep(ctx, o.Gap)
	}
	remote := o.RemotePebble
	if experiments.NeedsStateServer(base, variants, remote) {
		// Without a server the remote row would only say "skipped"; a
		// private one with a fresh directory makes the four protocols
		// comparable from one command, and it goes when the comparison does.
		svc, err := StartStateServer(ctx, o.StateServerBinary, "", "")
		if err != nil {
			return cmp, dir, fmt.Errorf("remote protocol: %w (or pass --remote-pebble ADDR)", err)
		}
		defer svc.Stop()
		remote = svc.Addr
		fmt.Printf("  remote: started koala statesvc on %s (pid %d), stopped at the end\n", svc.Addr, svc.PID())
	}
	for i, v := range variants {
		if ctx.Err() != nil {
			break
		}
		if i > 0 {
			// Let the previous run's tasks stop and its last metrics land.
			Sleep(ctx, o.Gap)
		}
		cmp.Rows = append(cmp.Rows, RunVariant(ctx, o.Services, VariantRun{
			Base: base, Variant: v, RemotePebble: remote, Stamp: stamp, Label: fmt.Sprintf("[%d/%d %s]", i+1, len(variants), v),
			Dir: dir, FlushWait: o.FlushWait, Margin: o.Margin, Terminator: "koala compare", DrainLag: drainLag, Profiler: prof,
		}))
	}
	if err := writeComparison(cmp, dir); err != nil {
		return cmp, dir, err
	}
	if ctx.Err() != nil {
		return cmp, dir, fmt.Errorf("comparison interrupted after %d of %d protocols (a running workflow continues on its own)", len(cmp.Rows), len(variants))
	}
	if v := cmp.Violations(); len(v) > 0 {
		return cmp, dir, fmt.Errorf("EXACTNESS VIOLATED: %s", strings.Join(v, "; "))
	}
	return cmp, dir, nil
}

// ensureWarmUp builds the warm-up snapshot o.Config loads when it is
// missing and its warm-up config is found beside it (as a suite would run
// that warm-up first); a missing snapshot without one stays the error a
// run gets. Then it reads the snapshot's files into the page cache
// (snapshot_cache.go) and says how.
func ensureWarmUp(ctx context.Context, o CompareOptions) (*experiments.SnapshotRead, error) {
	t, notes, err := experiments.FindWarmUp(o.Config, experiments.RunOptions{})
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "note:", n)
	}
	if err != nil {
		return nil, err
	}
	if !t.Built {
		fmt.Printf("warm-up snapshot %s is missing: building it first with %s\n", t.Dir, t.Config)
		m, err := BuildWarmUp(ctx, o.Services, t, BuildOptions{DialNATS: o.DialNATS, Margin: o.Margin, Terminator: "koala compare"})
		if err != nil {
			return nil, fmt.Errorf("build the warm-up snapshot %s with %s: %w", t.Dir, t.Config, err)
		}
		fmt.Printf("built the warm-up snapshot with %s (%d keys, %s); every protocol loads it\n\n", t.Config, m.Keys, gbText(m.Bytes))
		if o.Gap > 0 {
			Sleep(ctx, o.Gap) // let the warm-up's tasks stop
		}
	}
	fmt.Printf("reading the warm-up snapshot %s into the page cache\n", t.Dir)
	r, err := readIntoPageCache(ctx, t.Dir)
	if err != nil {
		return nil, err
	}
	fmt.Println("  " + strings.TrimSuffix(r.Text(), "."))
	return &r, nil
}

// RunVariant runs one protocol's workflow to its end and turns it into a
// comparison row. Failures become the row's status; they never end the
// comparison.
func RunVariant(ctx context.Context, s Services, v VariantRun) experiments.CompareRow {
	label := v.Label
	row := experiments.CompareRow{Protocol: v.Variant}
	in, skip, err := experiments.VariantInput(v.Base, v.Variant, v.RemotePebble)
	if err != nil {
		row.Status, row.Reason = experiments.StatusFailed, err.Error()
		fmt.Printf("%s failed: %v\n", label, err)
		return row
	}
	row.ReconfigProtocol, row.StateBackend = in.ReconfigProtocol, in.StateBackend
	if skip != "" {
		row.Status, row.Reason = experiments.StatusSkipped, skip
		fmt.Printf("%s skipped: %s\n", label, skip)
		return row
	}
	id := fmt.Sprintf("%s-%s-%s", in.Name, v.Variant, v.Stamp)
	host := hostcpu.Start(time.Second)
	defer host.Stop() // a run that fails; a finished one stops it below
	run, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		row.Status, row.Reason = experiments.StatusFailed, fmt.Sprintf("start workflow %s: %v", id, err)
		fmt.Printf("%s %s\n", label, row.Reason)
		return row
	}
	row.WorkflowID, row.RunID = run.GetID(), run.GetRunID()
	row.JobID = workflows.JobIDFor(run.GetID())
	row.UIURL = UILink(s.UIURL, s.Namespace, run.GetID(), run.GetRunID())
	fmt.Printf("%s started %s (%s, state %s)\n  ui: %s\n", label, id, in.ReconfigProtocol, in.StateBackend, row.UIURL)
	prof := v.Profiler.start(ctx, s.Temporal, run, v.Variant, in, label)

	res, err := Follow(ctx, run, label, in.TotalRuntimeSeconds, RunLimit(in, v.Margin))
	if err != nil {
		row.Profiles = prof.wait(control.Deployment{})
		if stopping(ctx, err) {
			if terr := Stop(s.Temporal, run, v.Terminator+": "+err.Error()); terr != nil {
				err = fmt.Errorf("%w (terminate: %v)", err, terr)
			}
		}
		if reason, ok := experiments.NotAvailable(err); ok {
			row.Status, row.Reason = experiments.StatusNotAvailable, reason
		} else {
			row.Status, row.Reason = experiments.StatusFailed, err.Error()
		}
		fmt.Printf("%s %s: %s\n", label, row.Status, row.Reason)
		return row
	}
	WriteRawResult(v.Dir, v.Variant, res)
	row.Profiles = prof.wait(res.Final)
	for _, l := range profileLines(label, row.Profiles) {
		fmt.Println(l)
	}
	rec := host.Stop()
	row.HostSamples = &rec

	if s.ClickHouse != nil {
		Sleep(ctx, v.FlushWait)
	}
	row = buildRow(ctx, s.ClickHouse, row, res, in.TotalRuntimeSeconds, v.DrainLag)
	reordered := fmt.Sprint(res.Reordered)
	if res.OrderUnchecked != "" {
		reordered = "n/a (" + res.OrderUnchecked + ")"
	}
	fmt.Printf("%s done: produced %d, lost=%d duplicated=%d reordered=%s, %d reconfiguration(s), %.0f ms control plane\n",
		label, res.Produced, res.Lost, res.Duplicated, reordered, len(res.Reconfigs), row.ControlPlaneMs)
	for _, rc := range res.Reconfigs {
		for _, m := range rc.Moves {
			fmt.Printf("%s %s %s: state moved %s\n", label, rc.ID, m.Step, activities.MoveSummary(m.Bytes, m.Millis, m.Bulk))
		}
	}
	if row.ExactnessViolated() {
		fmt.Printf("%s !!! EXACTNESS VIOLATED: lost=%d duplicated=%d reordered=%d (all must be 0)\n", label, res.Lost, res.Duplicated, res.Reordered)
	}
	if !s.KeepTopics {
		DropRunTopics(ctx, os.Stdout, in.KafkaBrokers, res.Topic)
	}
	return row
}

// buildRow fills a finished run's row from its result and its series read
// from ClickHouse (ch may be nil; the workflow's own sink series is then
// the fallback).
func buildRow(ctx context.Context, ch *metrics.ClickHouse, row experiments.CompareRow, res workflows.ExperimentResult, totalSec int, drainLag float64) experiments.CompareRow {
	var sr experiments.RunSeries
	var jobStart time.Time
	var merr []string
	if ch != nil {
		sr, jobStart, merr = readSeries(ctx, ch, res)
	} else {
		merr = append(merr, "no ClickHouse (--clickhouse none)")
	}
	if len(sr.Sink) == 0 {
		sr.Sink = res.SinkThroughput
	}
	if jobStart.IsZero() {
		jobStart = res.StartedAt // the workflow's own series then share its axis closely enough
	}
	sr.DrainLag = drainLag
	sr.HostBusy, sr.HostCPUs, sr.HostNotMeasured = hostSeries(row.HostSamples, jobStart)
	row = experiments.BuildRow(row, res, totalSec, jobStart, sr)
	row.MetricsError = strings.Join(merr, "; ")
	return row
}

// writeComparison prints the comparison's table and writes its files into
// dir.
func writeComparison(cmp experiments.Comparison, dir string) error {
	fmt.Println()
	if err := cmp.WriteTable(os.Stdout); err != nil {
		return err
	}
	paths, err := cmp.WriteFiles(dir)
	fmt.Println()
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// RunLimit is how long a run is waited for: its runtime and drain timeout
// (the default when unset) plus margin.
func RunLimit(in workflows.ExperimentInput, margin time.Duration) time.Duration {
	drain := in.DrainTimeoutSeconds
	if drain <= 0 {
		drain = experiments.DefaultDrainTimeoutSeconds
	}
	return time.Duration(in.TotalRuntimeSeconds+drain)*time.Second + margin
}

// SinkOperator is the name of a finished run's last operator.
func SinkOperator(res workflows.ExperimentResult) string {
	if ops := res.Final.Job.Operators; len(ops) > 0 {
		return ops[len(ops)-1].Name
	}
	return "sink"
}

// readSeries reads what the comparison needs of one finished run. Errors are
// collected, not fatal: a run's exactness stands without its metrics.
func readSeries(ctx context.Context, ch *metrics.ClickHouse, res workflows.ExperimentResult) (experiments.RunSeries, time.Time, []string) {
	var sr experiments.RunSeries
	var errs []string
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, what+": "+err.Error())
		}
	}
	job := res.JobID
	jobStart, err := ch.JobStart(ctx, job)
	if err != nil {
		note("job start", err)
		return sr, time.Time{}, errs
	}
	sr.Sink, err = ch.Throughput(ctx, job, SinkOperator(res))
	note("sink throughput", err)
	sr.Lag, err = ch.Lag(ctx, job)
	note("kafka lag", err)
	var targets []string
	for _, rc := range res.Reconfigs {
		if op := rc.Spec.TargetOperator; op != "" && !slices.Contains(targets, op) {
			targets = append(targets, op)
		}
	}
	sr.BatchMaxByTask = map[string][]metrics.Point{}
	if len(targets) > 0 {
		sr.TargetIn, err = ch.Throughput(ctx, job, targets[0])
		note("input of "+targets[0], err)
	}
	for _, op := range targets {
		byTask, err := ch.ColumnByTask(ctx, job, op, "batch_time_max_us", metrics.AggMax)
		note("batch latency of "+op, err)
		for task, pts := range byTask {
			sr.BatchMaxByTask[task] = pts
		}
		hists, err := ch.BatchHists(ctx, job, op)
		note("batch-time histograms of "+op, err)
		sr.BatchHists = append(sr.BatchHists, hists...)
		bytes, err := ch.ColumnSeries(ctx, job, op, "bytes_transferred", metrics.AggSum)
		note("bytes transferred of "+op, err)
		sr.Bytes = append(sr.Bytes, bytes...)
	}
	return sr, jobStart, errs
}

// hostSeries puts a run's host CPU samples on its metric axis (zero at
// jobStart). A run sampled on a machine without /proc/stat gives why; an
// unsampled one (nil, from before sampling) gives nothing.
func hostSeries(rec *hostcpu.Record, jobStart time.Time) (busy []metrics.Point, cpus int, why string) {
	if rec == nil {
		return nil, 0, ""
	}
	if rec.Err != "" {
		return nil, 0, rec.Err
	}
	busy, err := hostcpu.Cores(rec.Samples, jobStart)
	if err != nil {
		return nil, 0, err.Error()
	}
	return busy, rec.CPUs, ""
}
