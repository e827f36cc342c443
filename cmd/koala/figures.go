package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"koala/experiments/runner"
)

func init() {
	var clickhouse, chNative, outDir string
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
suite run separately): runs of the same experiment share a figure.

Beside the results (RESULTDIR, or --out) it also writes the paper's
figures under the Koala artifact's file names, each from the runs the
artifact's figure script reads (result folder <QueryName>_<ResultKeyword>,
or the ResultKeyword) and drawn with the koala figure that shows the same:

  Figure6/{azure,borg,taxi,twitch,q3,q6mod}.png   Fig 6 (lazy, SAR, DRRS)
  Figure8/{azure,...,q6mod}_latency.png           Fig 8 (lazy, Remote)
  Figure9.png                                     Fig 6 of parallelism_16_to_32
  Figure10.png ... Figure16.png                   Fig 10 ... Fig 16

A note per figure says which koala figure it is and how it differs from
the paper's; figures whose runs are not in the results are listed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if clickhouse == "" || clickhouse == "none" {
				return fmt.Errorf("figures need ClickHouse (--clickhouse or %s)", envClickHouse)
			}
			ch, err := newClickHouse(clickhouse, chNative)
			if err != nil {
				return err
			}
			return runner.Figures(cmd.Context(), runner.FiguresOptions{ClickHouse: ch, Dirs: args, Figures: figList, OutDir: outDir})
		},
	}
	f := cmd.Flags()
	f.StringVar(&clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL the metrics are read from (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	f.StringVar(&outDir, "out", "", "output directory (default RESULTDIR/figures)")
	f.StringSliceVar(&figList, "figures", nil, "figures to draw, e.g. 10,11 (default: the suite file's \"Figures\", else 6,8)")
	rootCmd.AddCommand(cmd)
}
