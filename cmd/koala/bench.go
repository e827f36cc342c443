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

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"koala/dataplane/control"
	"koala/dataplane/transport"
	"koala/experiments"
	"koala/experiments/bench"
)

// `koala bench` is what `make bench` runs; this file only turns its flags
// into bench.Options (package experiments/bench does the work).

func init() {
	var o bench.Options
	var temporalAddr, clickhouse, chNative, microPkgs, kafka, natsURL string
	var natsSec transport.NATSSecurity
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the benchmark suite against the local stack and write BENCHMARKS.md and results/bench/",
		Long: `bench runs, in this order (each phase prints its expected duration
before it starts; the whole default run takes about 28 min on 2 cores):

 1. micro: the hot-path testing.B benchmarks (frame codec, BucketOf,
    outputs batching, gRPC exchange, KLT lookup and size, the KLT lookup's
    share of a stateful batch, Pebble multi-get+put) with go test -bench,
    when the go toolchain is on PATH (~2 min);
 2. steady: steady state per core, one run per row without
    reconfiguration at a fixed rate (~6.5 min). Headline rows run as a user
    gets them (round-robin placement, default Kafka fetch sizes) and carry
    the targets: hello (stateless), counter (keyed, Pebble), counter-10m
    (the counter over 10 M keys), nexmark-q5 (sliding-window count, no
    target), q1-1src and q1-2src (Nexmark q1 with 1 and 2 source tasks);
    tuned rows are reported beside them and never judged: hello-tuned
    (co-located, 1 MB fetches) and counter-tuned (1 MB fetches). Events/s
    at the counting operator from ClickHouse over the window, divided by
    the utime+stime of the task workers (<run-dir>/worker-w*.pid) over the
    same window; per-batch latency (HDR); whether the run was sustained
    (the Kafka lag grew by less than one second of the offered rate); the
    state on disk at the window's start and the share of state lookups the
    value caches answered (worker status over NATS);
 3. ceilings: Kafka produce and consume (franz-go against the stack's
    broker), the frame codec, Pebble multi-get+put and the gRPC exchange
    (two in-process peers over loopback), each alone, and each
    steady-state figure as a fraction of its slowest component (~20 s);
 4. disruption: a rate probe (one run of the disruption config offering
    --probe-from × --probe-factor per --probe-step-seconds step up to
    --probe-max, until the Kafka lag grows), then the koala compare
    machinery on the 2→4 counter scale-out at 70 % of the probed rate for
    lazy, stop-and-restart, remote (against a koala statesvc it starts and
    stops itself) and drrs (~6 min);
 5. autoscale: the autoscaler (the --autoscale-config's "Autoscaler"
    block) on a keyed counter whose counter has a synthetic cost per
    record, its input doubled at 25 s, once with the lazy protocol
    (autoscale-lazy) and once with stop-and-restart (autoscale-sr):
    seconds from the step to the Kafka lag back at its pre-step level (in
    seconds of the offered input), decisions taken, and the lowest 1 s
    sink throughput over the 60 s after the step ÷ the rate before it
    (~3.5 min);
 6. state: scaling with state, in-process (an embedded cluster in this process):
    bytes migrated by a lazy fetch-on-demand 2→4 counter scale-out vs the
    total state (--state-sizes, default 0.5 to 4 GB of 4 KB values), at a
    fixed active key set (~2 min);
 7. rss: the counter offered far above its ceiling, every worker's VmRSS
    sampled each second; max RSS and its growth over the last half (~2.5 min);
 8. large-state: q6* (nexmark_query6_modified) with 1 and 2 stateful
    tasks over ≥ 2 GB of state (rows q6-1task, q6-2tasks): a warm-up run
    per row builds 1 M sellers × 2136 B and snapshots them, the measured
    run loads the snapshot and reads sellers uniformly over it; its targets
    are judged only if the state was ≥ 2 GB on disk and ≥ 4 × the value
    caches, with a cache hit rate ≤ 25 % (~5 min, most of it the builds).

--phases selects phases (e.g. --phases ceilings,rss, or --phases autoscale)
and --rows rows of the steady, large-state and autoscale phases (e.g.
--phases large-state --rows q6-1task, --phases steady --rows
q1-1src,q1-2src, or --phases autoscale --rows autoscale-lazy), so one row
can be run alone.

--profile also saves CPU profiles under <results>/run-<stamp>/profiles: each
worker's over every steady-state run's measurement window (the stack must
run with koala stack up --worker-pprof) and go test -cpuprofile per
micro-benchmark package, and adds their hottest functions to the report.

It needs the local stack (koala stack up) and writes BENCHMARKS.md and raw
JSON under results/bench/; a run of some phases or rows leaves those as
they are and writes its report and JSON under results/bench/run-<stamp>/.`,
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
			resolveNATSSecrets(&natsSec)
			o.DialNATS = func() (*nats.Conn, error) { return dialNATS(natsURL, natsSec, "koala-bench") }
			return bench.Run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&o.Namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers (env "+envKafka+")")
	f.StringVar(&natsURL, "nats", envOr(envNATS, defNATS), "NATS URL, to read the workers' value-cache counters (env "+envNATS+")")
	addNATSSecurityFlags(f, &natsSec)
	f.StringVar(&clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	f.StringVar(&o.UIURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL (env "+envTemporalUI+")")
	f.StringVar(&o.RunDir, "run-dir", "", "run directory of the local stack, for the worker PID files (default $KOALA_HOME/run or .koala/run)")
	f.StringVar(&o.ResultsDir, "results", "results/bench", "directory for the raw JSON")
	f.StringVar(&o.MDPath, "out", "", "markdown report (default "+bench.DefaultReport+" for a run of every phase and row; a run of some (--phases, --rows) writes its report only under <results>/run-<stamp>/ unless this names one)")
	f.StringVar(&microPkgs, "micro-packages", "./dataplane,./statesvc", "packages whose benchmarks run (comma-separated)")
	f.StringVar(&o.MicroRegex, "micro-bench", "Frame|BucketOf|OutputsBatching|Exchange$|KLTLookup|KLTMemory|KLTInstall|PebbleMultiGetPut$|StatefulBatchKLTShare", "go test -bench regexp")
	f.StringVar(&o.Benchtime, "benchtime", "1s", "go test -benchtime")
	f.StringVar(&o.MicroRepeat, "micro-repeat", "KLTLookup/(hit|miss)/batch$", "go test -bench regexp of the micro-benchmarks run --micro-repeat-count more times, reported as the median of all their runs (empty: none)")
	f.IntVar(&o.MicroRepeatCount, "micro-repeat-count", 4, "extra runs of the --micro-repeat benchmarks, 0 to 20")
	f.StringVar(&o.HelloConfig, "hello-config", "experiments/bench/hello-steady.json", "steady-state config of the stateless query's headline row")
	f.StringVar(&o.CounterConfig, "counter-config", "experiments/bench/counter-steady.json", "steady-state config of the keyed query's headline row")
	f.IntVar(&o.HelloRate, "hello-rate", 0, "producer rate of the hello and hello-tuned rows (0: the configs')")
	f.IntVar(&o.CounterRate, "counter-rate", 0, "producer rate of the counter and counter-tuned rows (0: the configs')")
	f.StringVar(&o.Rows, "rows", "all", "rows of the steady, large-state and autoscale phases to run, comma-separated: all or any of "+strings.Join(bench.SelectableRows(), ","))
	f.IntVar(&o.SteadySec, "steady-seconds", 0, "runtime of each steady-state and large-state measured run (0: the config's)")
	f.StringVar(&o.DisruptionConfig, "disruption-config", "experiments/bench/counter-lazy-2to4.json", "scale-out experiment compared across protocols")
	f.StringVar(&o.Protocols, "protocols", strings.Join(experiments.CompareVariants, ","), "protocols of the disruption phase")
	f.StringVar(&o.AutoscaleConfig, "autoscale-config", "experiments/bench/counter-autoscale.json", "autoscale phase: the keyed counter with an \"Autoscaler\" block whose input doubles (its RatePerSecond, then twice that)")
	f.IntVar(&o.ProbeFrom, "probe-from", 10_000, "disruption rate probe: first offered rate, events/s")
	f.Float64Var(&o.ProbeFactor, "probe-factor", 1.3, "disruption rate probe: each step offers this many times the last")
	f.IntVar(&o.ProbeMax, "probe-max", 160_000, "disruption rate probe: highest offered rate, events/s")
	f.IntVar(&o.ProbeStepSec, "probe-step-seconds", 6, "disruption rate probe: seconds per step (the first is skipped)")
	f.StringVar(&o.StatesvcAddr, "statesvc-listen", "127.0.0.1:7600", "address of the koala statesvc started for the remote protocol (empty: skip remote)")
	f.DurationVar(&o.Gap, "gap", 5*time.Second, "pause between two runs")
	f.DurationVar(&o.FlushWait, "flush-wait", 3*time.Second, "wait after a run before reading its metrics")
	f.DurationVar(&o.Margin, "timeout-margin", 3*time.Minute, "a run is given up this long after its runtime + drain timeout")
	f.StringVar(&o.WindowConfig, "window-config", "experiments/bench/nexmark-q5-steady.json", "steady-state config of the windowed query's row nexmark-q5 (empty: skip it)")
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
