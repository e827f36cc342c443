package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/workflows"
)

func init() {
	var temporalAddr, namespace, kafka, clickhouse, resultsDir, uiURL, protocols, remotePebble string
	var chNative string
	var gap, flushWait, extra time.Duration
	cmd := &cobra.Command{
		Use:   "compare CONFIG.json",
		Short: "Run the same experiment once per reconfiguration protocol and compare them",
		Long: `compare runs the experiment of CONFIG.json once per protocol, one after
another, each as its own RunExperiment workflow (id NAME-PROTOCOL-TIMESTAMP),
reads each run's metrics back from ClickHouse, prints one table row per
protocol and writes compare.json, compare.md and two plots (sink throughput
and source Kafka lag, aligned on the reconfiguration start) into
RESULTS/compare-TIMESTAMP/.

Protocols: lazy (the config's lazy knobs), stop-and-restart (the config's
state backend), remote (stop-and-restart over remote-pebble; needs
RemotePebbleAddrs in the config or --remote-pebble, skipped otherwise) and
drrs (recorded as "not available" while it is not implemented).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			variants, err := experiments.ParseVariants(protocols)
			if err != nil {
				return err
			}
			base, err := experiments.LoadConfig(args[0])
			if err != nil {
				return err
			}
			if len(base.KafkaBrokers) == 0 {
				base.KafkaBrokers = splitList(kafka)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			var ch *metrics.ClickHouse
			if clickhouse != "" && clickhouse != "none" {
				if ch, err = newClickHouse(clickhouse, chNative); err != nil {
					return err
				}
			}

			started := time.Now()
			stamp := started.Format("20060102-150405")
			dir := filepath.Join(resultsDir, "compare-"+stamp)
			cmp := experiments.Comparison{Experiment: base.Name, Config: args[0], Started: started}
			fmt.Printf("comparing %s: %s (%d s each)\n  results: %s\n", base.Name, strings.Join(variants, ", "), base.TotalRuntimeSeconds, dir)
			for i, v := range variants {
				if ctx.Err() != nil {
					break
				}
				if i > 0 && gap > 0 {
					select { // let the previous run's tasks stop and its last metrics land
					case <-time.After(gap):
					case <-ctx.Done():
					}
				}
				label := fmt.Sprintf("[%d/%d %s]", i+1, len(variants), v)
				row := runVariant(ctx, tc, ch, base, v, remotePebble, stamp, label, uiURL, namespace, dir, flushWait, extra)
				cmp.Rows = append(cmp.Rows, row)
			}
			fmt.Println()
			if err := cmp.WriteTable(os.Stdout); err != nil {
				return err
			}
			paths, werr := cmp.WriteFiles(dir)
			fmt.Println()
			for _, p := range paths {
				fmt.Println("wrote", p)
			}
			if werr != nil {
				return fmt.Errorf("write results: %w", werr)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("comparison interrupted after %d of %d protocols (a running workflow continues on its own)", len(cmp.Rows), len(variants))
			}
			if v := cmp.Violations(); len(v) > 0 {
				return fmt.Errorf("EXACTNESS VIOLATED: %s", strings.Join(v, "; "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&protocols, "protocols", strings.Join(experiments.CompareVariants, ","), "comma-separated protocols to run, in order ("+strings.Join(experiments.CompareVariants, ", ")+")")
	f.StringVar(&resultsDir, "results", "results", "directory under which compare-TIMESTAMP/ is written")
	f.StringVar(&remotePebble, "remote-pebble", "", "remote state server host:port list for the remote protocol (overrides the config's RemotePebbleAddrs)")
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers, comma-separated, used when the config names none (env "+envKafka+")")
	f.StringVar(&clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL the metrics are read from, none to skip (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	f.StringVar(&uiURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL, for links (env "+envTemporalUI+")")
	f.DurationVar(&gap, "gap", 5*time.Second, "pause between two runs")
	f.DurationVar(&flushWait, "flush-wait", 3*time.Second, "wait after a run before reading its metrics (workers flush once a second)")
	f.DurationVar(&extra, "timeout-margin", 5*time.Minute, "a run is given up (its workflow terminated) this long after TotalRuntimeSeconds + DrainTimeoutSeconds")
	rootCmd.AddCommand(cmd)
}

// runVariant runs one protocol's workflow to its end and turns it into a
// comparison row. Failures become the row's status; they never end the
// comparison.
func runVariant(ctx context.Context, tc client.Client, ch *metrics.ClickHouse, base workflows.ExperimentInput,
	variant, remotePebble, stamp, label, uiURL, namespace, dir string, flushWait, margin time.Duration) experiments.CompareRow {
	row := experiments.CompareRow{Protocol: variant}
	in, skip, err := experiments.VariantInput(base, variant, remotePebble)
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
	id := fmt.Sprintf("%s-%s-%s", in.Name, variant, stamp)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		row.Status, row.Reason = experiments.StatusFailed, fmt.Sprintf("start workflow %s: %v", id, err)
		fmt.Printf("%s %s\n", label, row.Reason)
		return row
	}
	row.WorkflowID, row.RunID = run.GetID(), run.GetRunID()
	row.JobID = workflows.JobIDFor(run.GetID())
	row.UIURL = fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s/history", strings.TrimRight(uiURL, "/"), namespace, run.GetID(), run.GetRunID())
	fmt.Printf("%s started %s (%s, state %s)\n  ui: %s\n", label, id, in.ReconfigProtocol, in.StateBackend, row.UIURL)

	drain := in.DrainTimeoutSeconds
	if drain <= 0 {
		drain = experiments.DefaultDrainTimeoutSeconds
	}
	limit := time.Duration(in.TotalRuntimeSeconds+drain)*time.Second + margin
	res, err := followVariant(ctx, run, label, in.TotalRuntimeSeconds, limit)
	if err != nil {
		if errors.Is(err, errGaveUp) {
			// Our own workflow: stop it so it does not disturb the next run.
			tctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			terr := tc.TerminateWorkflow(tctx, run.GetID(), run.GetRunID(), "koala compare: run exceeded its time limit")
			cancel()
			if terr != nil {
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
	writeRawResult(dir, variant, res)

	// Series from ClickHouse; the workflow's own sink series is the fallback.
	var sr experiments.RunSeries
	var jobStart time.Time
	var merr []string
	if ch != nil {
		select {
		case <-time.After(flushWait):
		case <-ctx.Done():
		}
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
	row = experiments.BuildRow(row, res, in.TotalRuntimeSeconds, jobStart, sr)
	if len(merr) > 0 {
		row.MetricsError = strings.Join(merr, "; ")
	}
	fmt.Printf("%s done: produced %d, lost=%d duplicated=%d, %d reconfiguration(s), %.0f ms control plane\n",
		label, res.Produced, res.Lost, res.Duplicated, len(res.Reconfigs), row.ControlPlaneMs)
	if row.ExactnessViolated() {
		fmt.Printf("%s !!! EXACTNESS VIOLATED: lost=%d duplicated=%d (both must be 0)\n", label, res.Lost, res.Duplicated)
	}
	return row
}

var errGaveUp = errors.New("run exceeded its time limit")

// followVariant waits for the workflow, printing "label phase elapsed / total"
// every 5 s, and gives up after limit.
func followVariant(ctx context.Context, run client.WorkflowRun, label string, total int, limit time.Duration) (workflows.ExperimentResult, error) {
	var res workflows.ExperimentResult
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run.Get(gctx, &res) }()
	start := time.Now()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		select {
		case err := <-done:
			return res, err
		case <-deadline.C:
			return res, fmt.Errorf("%w (%s)", errGaveUp, limit)
		case <-tick.C:
			el := time.Since(start).Seconds()
			phase := "running"
			if el > float64(total) {
				phase = "draining"
			}
			fmt.Printf("  %s %s %3.0fs / %ds\n", label, phase, el, total)
		}
	}
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
	sink := "sink"
	if ops := res.Final.Job.Operators; len(ops) > 0 {
		sink = ops[len(ops)-1].Name
	}
	sr.Sink, err = ch.Throughput(ctx, job, sink)
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

// writeRawResult keeps the workflow result next to the comparison, for
// digging into one run later. Best effort.
func writeRawResult(dir, variant string, res workflows.ExperimentResult) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "result-"+variant+".json"), append(data, '\n'), 0o644)
}
