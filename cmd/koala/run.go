package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"koala/experiments"
	"koala/workflows"
)

func init() {
	var temporalAddr, namespace, kafka, id, resultsDir, uiURL string
	var detach, printInput bool
	cmd := &cobra.Command{
		Use:   "run CONFIG.json",
		Short: "Start an experiment workflow, follow it, print its summary and write its plot",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := experiments.LoadConfig(args[0])
			if err != nil {
				return err
			}
			if len(in.KafkaBrokers) == 0 {
				in.KafkaBrokers = splitList(kafka)
			}
			if printInput {
				// The workflow input, for `temporal workflow start --input`.
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(in)
			}
			// Before anything is started: the workflow would reject these
			// names too, but only once it runs.
			if err := experiments.CheckQuery(in); err != nil {
				return fmt.Errorf("config %s: %w", args[0], err)
			}
			if id == "" {
				id = fmt.Sprintf("%s-%s", in.Name, time.Now().Format("20060102-150405"))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
			if err != nil {
				return fmt.Errorf("start experiment workflow %s: %w", id, err)
			}
			link := fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s/history", strings.TrimRight(uiURL, "/"), namespace, run.GetID(), run.GetRunID())
			fmt.Printf("experiment %s started\n  workflow: %s\n  ui:       %s\n", in.Name, run.GetID(), link)
			if detach {
				return nil
			}
			res, err := follow(ctx, run, in.TotalRuntimeSeconds)
			if err != nil {
				fmt.Printf("  status:   %s\n", experiments.FailureStatus(err))
				return fmt.Errorf("experiment workflow %s failed: %w (see %s)", run.GetID(), err, link)
			}
			dir := filepath.Join(resultsDir, run.GetID())
			sum, err := experiments.Report(res, experiments.ReportMeta{
				Experiment: in.Name, WorkflowID: run.GetID(), RunID: run.GetRunID(), UIURL: link, Dir: dir,
			})
			if err != nil {
				return err
			}
			if err := sum.WriteText(os.Stdout); err != nil {
				return err
			}
			if sum.Lost != 0 || sum.Duplicated != 0 {
				return fmt.Errorf("exactness violated: lost=%d duplicated=%d", sum.Lost, sum.Duplicated)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers, comma-separated, used when the config names none (env "+envKafka+")")
	f.StringVar(&id, "id", "", "workflow id (default NAME-YYYYMMDD-HHMMSS)")
	f.StringVar(&resultsDir, "results", "results", "directory for summaries and plots")
	f.StringVar(&uiURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL, for links (env "+envTemporalUI+")")
	f.BoolVar(&detach, "detach", false, "start the workflow and return without following it")
	f.BoolVar(&printInput, "print-input", false, "print the RunExperiment workflow input as JSON (for the Temporal CLI or UI) and exit")
	rootCmd.AddCommand(cmd)
}

// follow waits for the workflow, printing progress every few seconds.
func follow(ctx context.Context, run client.WorkflowRun, total int) (workflows.ExperimentResult, error) {
	var res workflows.ExperimentResult
	done := make(chan error, 1)
	go func() { done <- run.Get(ctx, &res) }()
	start := time.Now()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return res, err
		case <-tick.C:
			el := time.Since(start).Seconds()
			phase := "running"
			if el > float64(total) {
				phase = "draining"
			}
			fmt.Printf("  %s %3.0fs / %ds\n", phase, el, total)
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
