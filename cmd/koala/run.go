package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"koala/experiments"
	"koala/experiments/runner"
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
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			return runner.Run(ctx, runner.RunOptions{
				Services: runner.Services{Temporal: tc, Namespace: namespace, UIURL: uiURL},
				Input:    in, ID: id, ResultsDir: resultsDir, Detach: detach,
			})
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
