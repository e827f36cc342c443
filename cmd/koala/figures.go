package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"koala/experiments"
	"koala/workflows"
)

func init() {
	var clickhouse, outDir string
	var chNative string
	var figList []string
	cmd := &cobra.Command{
		Use:   "figures RESULTDIR [MORE_RESULTDIRS...]",
		Short: "Plot a suite's runs from ClickHouse: the figures its suite file lists (default Fig 6 and 8; also 10-16)",
		Long: `figures reads RESULTDIR/summary.json (written by 'koala suite'), reads
each succeeded run's metrics from ClickHouse and writes, per experiment of
the suite (one line per keyword, aligned on the reconfiguration start = 0 s):

  fig6_EXPERIMENT_throughput.png   source records/s
  fig6_EXPERIMENT_lag.png          source Kafka lag
  fig8_EXPERIMENT_latency.png      per-batch latency of the reconfigured operator (ms):
                                   p99 (top) and p50 (bottom) per second of the HDR
                                   histograms (batch_time_hdr) of all its tasks merged;
                                   runs without histogram rows: per-second max of
                                   batch_time_max_us and mean of batch_time_avg_us,
                                   marked "no HDR" in the legend
  compare_EXPERIMENT/              the 'koala compare' table, json and plots

into RESULTDIR/figures/ (or --out), and prints the comparison tables.

Which figures are drawn comes from the suite file's "Figures" list
(default ["6", "8"], the section 5.2 figures above) or --figures:

  10  fig10_KEYWORD_{throughput,bytes}.png    repeated reconfigurations / task migration
  11  fig11_KEYWORD_{task_throughput,lag}.png rebalance: per-task records/s, Kafka lag
  12  fig12_EXPERIMENT_{throughput,migrated}.png  variants aligned on the reconfiguration
  13  fig13_KEYWORD_{operators,lag}.png       several operators reconfigured
  14  fig14_EXPERIMENT_{throughput,migrated,migrated_vs_state}.png  state size sweep
  15  fig15_KEYWORD_lookup_vs_batch.png, fig15_klt_vs_keyspace.png
  16  fig16_locality_{migrated,time}.png, fig16_skew_{migrated,time}.png

For 10-16 a summary table is printed and written to summary.md.
With several result directories their runs are merged (e.g. a remote
suite run separately): runs of the same experiment share a figure.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var entries []workflows.SuiteEntryResult
			inputs := map[string]*workflows.ExperimentInput{}
			figs := figList
			for _, dir := range args {
				sum, err := experiments.ReadSuiteSummary(dir)
				if err != nil {
					return err
				}
				entries = append(entries, sum.Entries...)
				if len(figList) == 0 {
					f, err := experiments.SuiteFigures(sum.File)
					if err != nil {
						fmt.Printf("%s: %v (drawing Figures %v; use --figures)\n", dir, err, experiments.DefaultFigures)
						f = experiments.DefaultFigures
					}
					figs = mergeFigures(figs, f)
				}
				in, err := experiments.SuiteInputs(sum.File)
				if err != nil {
					fmt.Printf("%s: suite configs not readable (%v): figures 14-16 lack state sizes and key spaces\n", dir, err)
				}
				for k, v := range in {
					inputs[k] = v
				}
			}
			if err := experiments.CheckFigures(figs); err != nil {
				return fmt.Errorf("--figures: %w", err)
			}
			if clickhouse == "" || clickhouse == "none" {
				return fmt.Errorf("figures need ClickHouse (--clickhouse or %s)", envClickHouse)
			}
			ch, err := newClickHouse(clickhouse, chNative)
			if err != nil {
				return err
			}
			var runs []experiments.RunData
			for _, e := range entries {
				if e.Status != workflows.SuiteSucceeded {
					fmt.Printf("skip %s -> %s: %s\n", e.Experiment, e.Keyword, e.Status)
					continue
				}
				fr := experiments.ReadFigureRun(cmd.Context(), ch, e)
				r := experiments.ReadRunData(cmd.Context(), ch, fr, inputs[e.Keyword], figs)
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
			paths, cmps, err := experiments.WriteSuiteFigures(outDir, runs, figs)
			if terr := experiments.WriteFigureTables(os.Stdout, cmps); terr != nil && err == nil {
				err = terr
			}
			if t := experiments.SummaryTables(runs, figs); t != "" {
				fmt.Println()
				fmt.Print(t)
				p := filepath.Join(outDir, "summary.md")
				if werr := os.WriteFile(p, []byte(t), 0o644); werr != nil && err == nil {
					err = werr
				}
				paths = append(paths, p)
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
	clickHouseNativeFlag(f, &chNative)
	f.StringVar(&outDir, "out", "", "output directory (default RESULTDIR/figures)")
	f.StringSliceVar(&figList, "figures", nil, "figures to draw, e.g. 10,11 (default: the suite file's \"Figures\", else 6,8)")
	rootCmd.AddCommand(cmd)
}

// mergeFigures appends the figures of add not yet in figs.
func mergeFigures(figs, add []string) []string {
	for _, f := range add {
		if !slices.Contains(figs, f) {
			figs = append(figs, f)
		}
	}
	return figs
}
