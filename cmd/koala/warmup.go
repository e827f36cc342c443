package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"koala/dataplane/transport"
	"koala/experiments/runner"
)

func init() {
	var temporalAddr, namespace, kafka, natsURL, uiURL string
	var natsSec transport.NATSSecurity
	var rebuild, keepTopics bool
	var extra time.Duration
	var machine machineFlags
	cmd := &cobra.Command{
		Use:   "warmup CONFIG.json",
		Short: "Build a warm-up snapshot once (with progress), or say that it is built",
		Long: `warmup builds the warm-up state snapshot of CONFIG.json: CONFIG is either the
warm-up config (IsWarmUp true) or a config that loads the snapshot
(LoadWarmUpData true), whose warm-up config is then found beside it as a
suite finds it (same WarmUpDataFolder).

A snapshot already there (its manifest.json) is reported (keys, bytes,
path) and kept; --rebuild removes it and builds it again. Otherwise the
warm-up runs as a RunExperiment workflow, showing records read out of the
warm-up's total, the state written so far (the workers' stores), rate and
ETA: a progress bar on a terminal, a line every 5 s otherwise. At the end
it prints the snapshot's keys, bytes, seconds and path. Snapshots stay
under $KOALA_HOME (snapshots/<query>/<NumEvents>/, or WarmUpDataFolder)
for every later run, koala compare included, to load.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := machine.options()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			resolveNATSSecrets(&natsSec)
			return runner.WarmUp(ctx, runner.WarmUpOptions{
				Services: runner.Services{Temporal: tc, Namespace: namespace, UIURL: uiURL, Brokers: splitList(kafka), KeepTopics: keepTopics},
				Config:   args[0], Run: o, Rebuild: rebuild,
				Build: runner.BuildOptions{
					DialNATS: func() (*nats.Conn, error) { return dialNATS(natsURL, natsSec, "koala-warmup") },
					Margin:   extra, Terminator: "koala warmup",
				},
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&rebuild, "rebuild", false, "remove an existing snapshot and build it again")
	f.BoolVar(&keepTopics, "keep-topics", false, "keep the warm-up's Kafka topics (by default they are dropped once the snapshot is built)")
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers, comma-separated, used when the config names none (env "+envKafka+")")
	f.StringVar(&natsURL, "nats", envOr(envNATS, defNATS), "NATS URL, to read the progress from the workers (env "+envNATS+")")
	addNATSSecurityFlags(f, &natsSec)
	f.StringVar(&uiURL, "ui", envOr(envTemporalUI, defTemporalUI), "Temporal web UI base URL, for links (env "+envTemporalUI+")")
	f.DurationVar(&extra, "timeout-margin", 5*time.Minute, "the warm-up is given up (its workflow terminated) this long after TotalRuntimeSeconds + DrainTimeoutSeconds")
	machine.register(f)
	rootCmd.AddCommand(cmd)
}
