package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/workflows"
)

func init() {
	var clickhouse, outDir string
	cmd := &cobra.Command{
		Use:   "figures RESULTDIR [MORE_RESULTDIRS...]",
		Short: "Plot a suite's runs from ClickHouse: Fig 6 (throughput, Kafka lag) and Fig 8 (per-batch latency) per protocol",
		Long: `figures reads RESULTDIR/summary.json (written by 'koala suite'), reads
each succeeded run's metrics from ClickHouse and writes, per experiment of
the suite (one line per keyword, aligned on the reconfiguration start = 0 s):

  fig6_EXPERIMENT_throughput.png   source records/s
  fig6_EXPERIMENT_lag.png          source Kafka lag
  fig8_EXPERIMENT_latency_avg.png  mean batch_time_avg_us of the reconfigured operator (ms)
  fig8_EXPERIMENT_latency_max.png  max batch_time_max_us of the reconfigured operator (ms)
  compare_EXPERIMENT/              the 'koala compare' table, json and plots

into RESULTDIR/figures/ (or --out), and prints the comparison tables.
With several result directories their runs are merged (e.g. a remote
suite run separately): runs of the same experiment share a figure.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var entries []workflows.SuiteEntryResult
			for _, dir := range args {
				sum, err := experiments.ReadSuiteSummary(dir)
				if err != nil {
					return err
				}
				entries = append(entries, sum.Entries...)
			}
			if clickhouse == "" || clickhouse == "none" {
				return fmt.Errorf("figures need ClickHouse (--clickhouse or %s)", envClickHouse)
			}
			ch := metrics.NewClickHouse(clickhouse, "koala")
			var runs []experiments.FigureRun
			for _, e := range entries {
				if e.Status != workflows.SuiteSucceeded {
					fmt.Printf("skip %s -> %s: %s\n", e.Experiment, e.Keyword, e.Status)
					continue
				}
				r := experiments.ReadFigureRun(cmd.Context(), ch, e)
				for _, msg := range r.Errors {
					fmt.Printf("%s -> %s: %s\n", e.Experiment, e.Keyword, msg)
				}
				runs = append(runs, r)
			}
			if len(runs) == 0 {
				return fmt.Errorf("no succeeded run in %s", strings.Join(args, ", "))
			}
			if outDir == "" {
				outDir = filepath.Join(args[0], "figures")
			}
			paths, cmps, err := experiments.WriteFigures(outDir, runs)
			if terr := experiments.WriteFigureTables(os.Stdout, cmps); terr != nil && err == nil {
				err = terr
			}
			fmt.Println()
			for _, p := range paths {
				fmt.Println("wrote", p)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL the metrics are read from (env "+envClickHouse+")")
	f.StringVar(&outDir, "out", "", "output directory (default RESULTDIR/figures)")
	rootCmd.AddCommand(cmd)
}
