package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/workflows"
)

// SuiteOptions configure Suite: either File, a suite file to start, or
// Attach, the id of a RunSuite workflow already running.
type SuiteOptions struct {
	Services
	File       string
	Attach     string
	ResultsDir string
	Every      time.Duration // progress line interval
	// Run fits every config to this machine (experiments.RunOptions).
	Run experiments.RunOptions
}

// Suite starts (or attaches to) a RunSuite workflow, follows it with a
// progress line every Every, and writes and prints its summary under
// ResultsDir/suite_<stamp>/. The suite runs in Temporal: if this process
// dies, it goes on.
func Suite(ctx context.Context, o SuiteOptions) error {
	var suite experiments.Suite
	if o.Attach == "" {
		var err error
		suite, err = experiments.LoadSuiteFor(o.File, o.Run)
		for _, n := range suite.Notes {
			fmt.Fprintln(os.Stderr, "note:", n)
		}
		if err != nil {
			return err
		}
		for i := range suite.Input.Entries {
			DefaultBrokers(&suite.Input.Entries[i].Input, o.Brokers)
		}
	}
	tc, ch := o.Temporal, o.ClickHouse
	var err error
	started := time.Now()
	stamp := started.Format("20060102-150405")
	var run client.WorkflowRun
	if o.Attach != "" {
		run = tc.GetWorkflow(ctx, o.Attach, "")
	} else {
		id := fmt.Sprintf("suite-%s-%s", workflows.JobIDFor(suite.Name), stamp)
		run, err = tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunSuite, suite.Input)
		if err != nil {
			return fmt.Errorf("start suite workflow %s: %w", id, err)
		}
	}
	dir, err := filepath.Abs(filepath.Join(o.ResultsDir, "suite_"+stamp))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "suite.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	out := io.MultiWriter(os.Stdout, logf)
	link := UILink(o.UIURL, o.Namespace, run.GetID(), run.GetRunID())
	fmt.Fprintf(out, "suite %s: workflow %s\n  ui:      %s\n  results: %s\n", suite.Name, run.GetID(), link, dir)
	for i, e := range suite.Input.Entries {
		fmt.Fprintf(out, "  %d. %s -> %s (%s, %d s)\n", i+1, e.Input.Name, e.Keyword, e.Input.ReconfigProtocol, e.Input.TotalRuntimeSeconds)
	}

	var res workflows.SuiteResult
	if err := followSuite(ctx, tc, ch, run, out, o.Every, &res); err != nil {
		return fmt.Errorf("suite workflow %s: %w (the suite may still be running; follow it with --o.Attach %s)", run.GetID(), err, run.GetID())
	}
	absResults, _ := filepath.Abs(o.ResultsDir)
	sum := experiments.SuiteSummary{
		Suite: res.Name, File: suite.File, WorkflowID: run.GetID(), RunID: run.GetRunID(),
		Started: started, Finished: time.Now(), Entries: res.Entries, LogsDir: dir, ResultsDir: absResults, Planned: len(suite.Input.Entries),
	}
	for _, e := range res.Entries {
		writeEntryResult(ctx, tc, out, dir, e)
	}
	p, err := experiments.WriteSuiteSummary(dir, sum)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s\n\n", p)
	if err := experiments.WriteSuiteTable(out, sum); err != nil {
		return err
	}
	fmt.Fprintf(out, "figures: ./bin/koala figures %s\n", dir)
	var failed []string
	for _, e := range res.Entries {
		if e.Status != workflows.SuiteSucceeded {
			failed = append(failed, e.Keyword)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d experiments failed: %s", len(failed), len(res.Entries), strings.Join(failed, ", "))
	}
	return nil
}

// followSuite waits for the suite, printing a progress line every interval
// and one line per finished entry.
func followSuite(ctx context.Context, tc client.Client, ch *metrics.ClickHouse, run client.WorkflowRun, out io.Writer, every time.Duration, res *workflows.SuiteResult) error {
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, res) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	reported := 0
	for {
		select {
		case err := <-done:
			for _, e := range res.Entries[min(reported, len(res.Entries)):] {
				printEntryDone(out, e)
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var p workflows.SuiteProgress
			v, err := tc.QueryWorkflow(qctx, run.GetID(), run.GetRunID(), workflows.SuiteProgressQuery)
			if err == nil {
				err = v.Get(&p)
			}
			if err != nil {
				fmt.Fprintf(out, "  (progress query: %v)\n", oneLineErr(err))
				cancel()
				continue
			}
			for _, e := range p.Done[min(reported, len(p.Done)):] {
				printEntryDone(out, e)
			}
			reported = max(reported, len(p.Done))
			if p.Current > 0 {
				phase := childPhase(qctx, tc, p.ChildID)
				line := fmt.Sprintf("  [%d/%d %s] %4.0fs  %s", p.Current, p.Total, p.Keyword, time.Since(p.StartedAt).Seconds(), phase)
				if ch != nil {
					line += liveRates(qctx, ch, workflows.JobIDFor(p.ChildID))
				}
				fmt.Fprintln(out, line)
			}
			cancel()
		}
	}
}

func printEntryDone(out io.Writer, e workflows.SuiteEntryResult) {
	line := fmt.Sprintf("  [%d %s] %s after %.0fs", e.Index, e.Keyword, e.Status, e.Seconds)
	switch {
	case e.Status == workflows.SuiteSucceeded && e.ExactnessUnchecked != "":
		line += fmt.Sprintf(": produced %d, exactness not checked at run time (%s)", e.Produced, e.ExactnessUnchecked)
	case e.Status == workflows.SuiteSucceeded:
		line += fmt.Sprintf(": produced %d, lost=%d duplicated=%d reordered=%d", e.Produced, e.Lost, e.Duplicated, e.Reordered)
	default:
		line += ": " + e.Error
	}
	fmt.Fprintln(out, line)
}

// childPhase describes what the running experiment workflow is doing: its
// pending activities, or its running reconfiguration child and that child's
// pending step, or else that the input is flowing.
func childPhase(ctx context.Context, tc client.Client, id string) string {
	d, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "starting"
	}
	var parts []string
	for _, c := range d.GetPendingChildren() {
		step := ""
		if cd, err := tc.DescribeWorkflowExecution(ctx, c.GetWorkflowId(), ""); err == nil {
			var acts []string
			for _, a := range cd.GetPendingActivities() {
				acts = append(acts, a.GetActivityType().GetName())
			}
			if len(acts) > 0 {
				step = " step " + strings.Join(acts, ",")
			}
		}
		parts = append(parts, fmt.Sprintf("reconfiguring (%s%s)", c.GetWorkflowTypeName(), step))
	}
	for _, a := range d.GetPendingActivities() {
		parts = append(parts, a.GetActivityType().GetName())
	}
	if len(parts) == 0 {
		if st := d.GetWorkflowExecutionInfo().GetStatus().String(); st != "Running" {
			return strings.ToLower(st)
		}
		return "input flowing"
	}
	return strings.Join(parts, " + ")
}

// liveRates is ", source N ev/s, lag M" from the last complete second in
// ClickHouse, or "" when there is nothing yet.
func liveRates(ctx context.Context, ch *metrics.ClickHouse, job string) string {
	src, err := ch.Throughput(ctx, job, "source")
	if err != nil || len(src) < 2 {
		return ""
	}
	s := fmt.Sprintf("  source %.0f ev/s", src[len(src)-2].Value)
	if lag, err := ch.Lag(ctx, job); err == nil && len(lag) > 0 {
		s += fmt.Sprintf(", lag %.0f", lag[len(lag)-1].Value)
	}
	return s
}

// writeEntryResult saves an entry's full RunExperiment result and its
// throughput plot under dir/INDEX-KEYWORD/. Best effort.
func writeEntryResult(ctx context.Context, tc client.Client, out io.Writer, dir string, e workflows.SuiteEntryResult) {
	if e.WorkflowID == "" {
		return
	}
	edir := filepath.Join(dir, fmt.Sprintf("%d-%s", e.Index, workflows.JobIDFor(e.Keyword)))
	var res workflows.ExperimentResult
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.GetWorkflow(gctx, e.WorkflowID, "").Get(gctx, &res); err != nil {
		return
	}
	if err := os.MkdirAll(edir, 0o755); err != nil {
		return
	}
	if data, err := json.MarshalIndent(res, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(edir, "result.json"), append(data, '\n'), 0o644)
	}
	if s, err := experiments.Report(res, experiments.ReportMeta{Experiment: e.Experiment + " -> " + e.Keyword, WorkflowID: e.WorkflowID, Dir: edir}); err == nil && s.PlotPath != "" {
		fmt.Fprintf(out, "wrote %s\n", s.PlotPath)
	}
}

func oneLineErr(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
