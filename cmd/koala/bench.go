package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"koala/dataplane/control"
	"koala/experiments"
	"koala/experiments/bench"
)

// `koala bench` is what `make bench` runs; this file only turns its flags
// into bench.Options (package experiments/bench does the work).

func init() {
	var o bench.Options
	var temporalAddr, clickhouse, chNative, microPkgs, kafka string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the benchmark suite against the local stack and write BENCHMARKS.md and results/bench/",
		Long: `bench runs, in this order:

 1. micro: the hot-path testing.B benchmarks (frame codec, BucketOf,
    outputs batching, gRPC exchange, KLT lookup and size, the KLT lookup's
    share of a stateful batch, Pebble multi-get+put) with go test -bench,
    when the go toolchain is on PATH;
 2. steady: steady state per core of the hello (stateless), counter (keyed,
    Pebble) and nexmark-q5 (sliding-window count) queries without
    reconfiguration at a fixed rate; sink events/s from ClickHouse divided by
    the utime+stime of all worker processes (<run-dir>/worker-w*.pid) over the
    same window, plus per-batch latency (p50/p99 of the tasks' HDR
    histograms of individual batch times over the same window);
 3. ceilings: Kafka produce and consume (franz-go against the stack's
    broker), the frame codec, Pebble multi-get+put and the gRPC exchange
    (two in-process peers over loopback), each alone, and each
    steady-state figure as a fraction of its slowest component;
 4. disruption: the koala compare machinery on the 2→4 counter scale-out for
    lazy, stop-and-restart, remote (against a koala statesvc it starts and
    stops itself) and drrs;
 5. state: scaling with state, in-process (an embedded cluster in this process):
    bytes migrated by a lazy fetch-on-demand 2→4 counter scale-out vs the
    total state (--state-sizes, default 0.5 to 4 GB of 4 KB values), at a
    fixed active key set;
 6. rss: the counter offered far above its ceiling, every worker's VmRSS
    sampled each second; max RSS and its growth over the last half.

--profile also saves CPU profiles under <results>/run-<stamp>/profiles: each
worker's over every steady-state run's measurement window (the stack must
run with koala stack up --worker-pprof) and go test -cpuprofile per
micro-benchmark package, and adds their hottest functions to the report.

--phases selects a subset (e.g. --phases ceilings,rss). It needs the local stack (koala stack up) and writes BENCHMARKS.md and raw
JSON under results/bench/.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.RunDir == "" {
				o.RunDir = filepath.Join(control.Home(), "run")
			}
			o.DialTemporal = func(ctx context.Context) (client.Client, error) { return dialTemporal(ctx, temporalAddr, o.Namespace) }
			ch, err := clickHouseOrNil(clickhouse, chNative)
			if err != nil {
				return err
			}
			o.ClickHouse = ch
			o.Kafka, o.MicroPackages, o.GoCommand = splitList(kafka), splitList(microPkgs), envOr("GO", "go")
			return bench.Run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&o.Namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers (env "+envKafka+")")
	f.StringVar(&clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	f.StringVar(&o.UIURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL (env "+envTemporalUI+")")
	f.StringVar(&o.RunDir, "run-dir", "", "run directory of the local stack, for the worker PID files (default $KOALA_HOME/run or .koala/run)")
	f.StringVar(&o.ResultsDir, "results", "results/bench", "directory for the raw JSON")
	f.StringVar(&o.MDPath, "out", "BENCHMARKS.md", "markdown report")
	f.StringVar(&microPkgs, "micro-packages", "./dataplane,./statesvc", "packages whose benchmarks run (comma-separated)")
	f.StringVar(&o.MicroRegex, "micro-bench", "Frame|BucketOf|OutputsBatching|Exchange$|KLTLookup|KLTMemory|PebbleMultiGetPut$|StatefulBatchKLTShare", "go test -bench regexp")
	f.StringVar(&o.Benchtime, "benchtime", "1s", "go test -benchtime")
	f.StringVar(&o.MicroRepeat, "micro-repeat", "KLTLookup/(hit|miss)/batch$", "go test -bench regexp of the micro-benchmarks run --micro-repeat-count more times, reported as the median of all their runs (empty: none)")
	f.IntVar(&o.MicroRepeatCount, "micro-repeat-count", 4, "extra runs of the --micro-repeat benchmarks, 0 to 20")
	f.StringVar(&o.HelloConfig, "hello-config", "experiments/bench/hello-steady.json", "steady-state config of the stateless query")
	f.StringVar(&o.CounterConfig, "counter-config", "experiments/bench/counter-steady.json", "steady-state config of the keyed query")
	f.IntVar(&o.HelloRate, "hello-rate", 0, "producer rate of the stateless run (0: the config's)")
	f.IntVar(&o.CounterRate, "counter-rate", 0, "producer rate of the keyed run (0: the config's)")
	f.IntVar(&o.SteadySec, "steady-seconds", 0, "runtime of each steady-state run (0: the config's)")
	f.StringVar(&o.DisruptionConfig, "disruption-config", "experiments/bench/counter-lazy-2to4.json", "scale-out experiment compared across protocols")
	f.StringVar(&o.Protocols, "protocols", strings.Join(experiments.CompareVariants, ","), "protocols of the disruption phase")
	f.StringVar(&o.StatesvcAddr, "statesvc-listen", "127.0.0.1:7600", "address of the koala statesvc started for the remote protocol (empty: skip remote)")
	f.DurationVar(&o.Gap, "gap", 5*time.Second, "pause between two runs")
	f.DurationVar(&o.FlushWait, "flush-wait", 3*time.Second, "wait after a run before reading its metrics")
	f.DurationVar(&o.Margin, "timeout-margin", 3*time.Minute, "a run is given up this long after its runtime + drain timeout")
	f.StringVar(&o.WindowConfig, "window-config", "experiments/bench/nexmark-q5-steady.json", "steady-state config of the windowed query (empty: skip it)")
	f.IntVar(&o.WindowRate, "window-rate", 0, "producer rate of the windowed run (0: the config's)")
	f.DurationVar(&o.CeilingDuration, "ceiling-duration", 5*time.Second, "how long the frame codec, Pebble and gRPC exchange ceilings run each")
	f.IntVar(&o.KafkaRecords, "ceiling-kafka-records", 500_000, "records produced and consumed by the Kafka ceiling")
	f.IntVar(&o.PebbleKeys, "ceiling-pebble-keys", 200_000, "distinct keys of the Pebble ceiling")
	f.StringVar(&o.RSSConfig, "rss-config", "experiments/bench/counter-steady.json", "query config of the RSS-under-backpressure run")
	f.IntVar(&o.RSSRate, "rss-rate", 80_000, "offered rate of the RSS run (well above the query's ceiling)")
	f.IntVar(&o.RSSSec, "rss-seconds", 90, "runtime of the RSS run")
	f.DurationVar(&o.RSSInterval, "rss-interval", time.Second, "RSS sampling interval")
	f.StringVar(&o.StateSizes, "state-sizes", "0.5GB,1GB,2GB,4GB", "state phase: total state (keys + values) of each point, comma-separated, in bytes or with a unit B, KB, MB, GB (powers of 1000)")
	f.IntVar(&o.StateValueBytes, "state-value-bytes", 4096, fmt.Sprintf("state phase: bytes of counter state per key (the 8-byte count and a pad), %d to %d", bench.MinStateValueBytes, bench.MaxStateValueBytes))
	f.IntVar(&o.StateActiveKeys, "state-active-keys", 20000, "state phase: size of the fixed active key set")
	f.BoolVar(&o.Profile, "profile", false, "save CPU profiles of the workers (steady state; needs `koala stack up --worker-pprof`) and of the micro-benchmarks, and summarise them in the report")
	f.IntVar(&o.ProfileSec, "profile-seconds", 0, "with --profile: longest steady-state profile in seconds (0: the whole measurement window)")
	f.StringVar(&o.Phases, "phases", "all", "phases to run, comma-separated: all or any of "+strings.Join(bench.BenchPhases, ","))
	rootCmd.AddCommand(cmd)
}
