package main

import (
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/transport"
	"koala/experiments"
	"koala/experiments/runner"
)

func init() {
	var temporalAddr, namespace, kafka, clickhouse, chNative, resultsDir, uiURL, protocols, remotePebble, natsURL string
	var keepTopics bool
	var report string
	var natsSec transport.NATSSecurity
	var gap, flushWait, extra time.Duration
	var overload, probeFactor float64
	var prof profileFlags
	var probeFrom, probeMax, probeStep int
	cmd := &cobra.Command{
		Use:   "compare CONFIG.json | --report DIR",
		Short: "Run the same experiment once per reconfiguration protocol and compare them",
		Long: `compare runs the experiment of CONFIG.json once per protocol, one after
another, each as its own RunExperiment workflow (id NAME-PROTOCOL-TIMESTAMP),
reads each run's metrics back from ClickHouse, prints one table row per
protocol and writes compare.json, compare.md and two plots (sink throughput
and source Kafka lag, aligned on the reconfiguration start) into
RESULTS/compare-TIMESTAMP/. When one protocol's lag peaks at 3 × or more
every other's (remote's backlog, often), the lag plot is also drawn
without it (kafka-lag-others.png), so the others' backlogs can be read.

Protocols: lazy (the config's lazy knobs), stop-and-restart (the config's
state backend), remote (stop-and-restart over remote-pebble; needs
RemotePebbleAddrs in the config or --remote-pebble; without either,
compare starts its own koala statesvc for the run and stops it after) and
drrs (subscales moved one after another, records re-routed).

--overload F first runs the config once without its reconfigurations over
a staircase of rates (--probe-from, × --probe-factor per step up to
--probe-max, --probe-step seconds each) to find the rate the pre-scale
pipeline sustains, then runs every protocol at F × that rate, so a backlog
builds up before the reconfiguration and must drain after it; a backlog
table (lag at the trigger, when it stopped growing, when it drained, what
was left) follows the main one.

A config that loads a warm-up snapshot (LoadWarmUpData) whose snapshot is
missing gets it built first, once, by the warm-up config found beside it
(as koala warmup does, with its progress); without one, compare stops and
says which snapshot is missing.

--profile (on a stack started with koala stack up --worker-pprof) takes
every worker's CPU profile over --profile-seconds ending 1 s before each
run's first trigger, and over as long from each of --profile-after's
seconds after it (0 and 15: the swap or bulk move, then the drain).
compare.md then says where each worker's cores went (serving fetches,
moving state, the operator's state store and the rest of it, producers,
compactions, Kafka, gRPC, GC), and the profiles are kept in
RESULTS/compare-TIMESTAMP/profiles/ for go tool pprof.

--report DIR runs nothing: it reads the comparison kept in DIR (a
compare-TIMESTAMP directory) and its runs' series again from ClickHouse and
rewrites its files, so figures added to compare since appear for it.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if report != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ch, err := clickHouseOrNil(clickhouse, chNative)
			if err != nil {
				return err
			}
			if report != "" {
				return runner.Report(ctx, ch, report)
			}
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			resolveNATSSecrets(&natsSec)
			return runner.Compare(ctx, runner.CompareOptions{
				Services: runner.Services{Temporal: tc, ClickHouse: ch, Namespace: namespace, UIURL: uiURL, Brokers: splitList(kafka), KeepTopics: keepTopics},
				Config:   args[0], Protocols: protocols, ResultsDir: resultsDir, RemotePebble: remotePebble,
				Gap: gap, FlushWait: flushWait, Margin: extra,
				Overload: overload, ProbeFrom: probeFrom, ProbeFactor: probeFactor, ProbeMax: probeMax, ProbeStepSec: probeStep,
				DialNATS: func() (*nats.Conn, error) { return dialNATS(natsURL, natsSec, "koala-compare") },
				Profile:  prof.options(),
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&protocols, "protocols", strings.Join(experiments.CompareVariants, ","), "comma-separated protocols to run, in order ("+strings.Join(experiments.CompareVariants, ", ")+")")
	f.StringVar(&resultsDir, "results", "results", "directory under which compare-TIMESTAMP/ is written")
	f.StringVar(&report, "report", "", "rebuild the comparison kept in this compare-TIMESTAMP directory from ClickHouse instead of running one")
	f.BoolVar(&keepTopics, "keep-topics", false, "keep each run's Kafka topics (by default a run's topics are dropped once its results are read)")
	f.StringVar(&remotePebble, "remote-pebble", "", "remote state server host:port list for the remote protocol (overrides the config's RemotePebbleAddrs)")
	f.Float64Var(&overload, "overload", 0, "probe the sustainable rate first and run every protocol at this multiple of it (1.0-3.0; 0: the config's rate)")
	f.IntVar(&probeFrom, "probe-from", 2000, "first rate of the probe's staircase, events/s")
	f.Float64Var(&probeFactor, "probe-factor", 1.15, "rate multiple from one probe step to the next")
	f.IntVar(&probeMax, "probe-max", 60000, "highest rate of the probe's staircase, events/s")
	f.IntVar(&probeStep, "probe-step", 8, "seconds per probe step")
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers, comma-separated, used when the config names none (env "+envKafka+")")
	f.StringVar(&clickhouse, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL the metrics are read from, none to skip (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	f.StringVar(&natsURL, "nats", envOr(envNATS, defNATS), "NATS URL, for the progress of a warm-up compare builds first (env "+envNATS+")")
	addNATSSecurityFlags(f, &natsSec)
	f.StringVar(&uiURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL, for links (env "+envTemporalUI+")")
	addCompareTimingFlags(f, &gap, &flushWait, &extra)
	addProfileFlags(f, &prof)
	rootCmd.AddCommand(cmd)
}

// addCompareTimingFlags registers the pauses and limits of comparison runs
// (koala compare, and koala suite for a comparison suite).
func addCompareTimingFlags(f *pflag.FlagSet, gap, flushWait, margin *time.Duration) {
	f.DurationVar(gap, "gap", 5*time.Second, "pause between two runs")
	f.DurationVar(flushWait, "flush-wait", 3*time.Second, "wait after a run before reading its metrics (workers flush once a second)")
	f.DurationVar(margin, "timeout-margin", 5*time.Minute, "a run is given up (its workflow terminated) this long after TotalRuntimeSeconds + DrainTimeoutSeconds")
}

// profileFlags are the flags of koala compare --profile (and of a
// comparison suite).
type profileFlags struct {
	on      bool
	runDir  string
	after   []int
	seconds int
}

func addProfileFlags(f *pflag.FlagSet, p *profileFlags) {
	f.BoolVar(&p.on, "profile", false, "take every worker's CPU profile before and after each run's first trigger (needs koala stack up --worker-pprof)")
	f.IntSliceVar(&p.after, "profile-after", []int{0, 15}, "with --profile: where the windows after the trigger start, seconds from it, ascending, at least --profile-seconds apart")
	f.IntVar(&p.seconds, "profile-seconds", 10, "with --profile: length of each window, seconds (1-120)")
	f.StringVar(&p.runDir, "run-dir", "", "with --profile: run directory of the local stack, for the workers' pprof address files (default $KOALA_HOME/run or .koala/run)")
}

// options is nil without --profile.
func (p profileFlags) options() *runner.ProfileOptions {
	if !p.on {
		return nil
	}
	dir := p.runDir
	if dir == "" {
		dir = filepath.Join(control.Home(), "run")
	}
	return &runner.ProfileOptions{RunDir: dir, After: p.after, Seconds: p.seconds}
}

// clickHouseOrNil is the metrics reader of url (inserts) and native (DDL
// and reads); "" or "none" as url turns it off.
func clickHouseOrNil(url, native string) (*metrics.ClickHouse, error) {
	if url == "" || url == "none" {
		return nil, nil
	}
	return newClickHouse(url, native)
}
