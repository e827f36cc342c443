package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"koala/deploy/local"
)

func init() {
	rootCmd.AddCommand(newStackCmd())
}

// newStackCmd is `koala stack up|down|status|install`: the local stack of
// Temporal, NATS, Kafka and ClickHouse (plus controller and workers) as
// plain processes on 127.0.0.1.
func newStackCmd() *cobra.Command {
	cfg := local.DefaultConfig()
	cfg.Controller = true
	cfg.Workers = 3
	cfg.UI = true
	cfg.Progress = os.Stderr

	cmd := &cobra.Command{
		Use:   "stack",
		Short: "Install, start, check and stop the local stack (Temporal, NATS, Kafka, ClickHouse, controller, workers, ui)",
		Long: `The local stack runs every service as a plain process bound to 127.0.0.1,
with a PID file and a log file under the run directory (default <home>/run).
Installs are cached under the home directory (default $KOALA_HOME or ./.koala).`,
	}
	f := cmd.PersistentFlags()
	addStackFlags(f, &cfg)
	f.BoolVar(&cfg.UI, "ui", cfg.UI, "up: also start koala ui, the live view of the running jobs, on 127.0.0.1 at --ui-port")
	f.IntVar(&cfg.UIPort, "ui-port", cfg.UIPort, "port of koala ui (with --ui)")
	f.BoolVar(&cfg.WorkerPprof, "worker-pprof", false, "up: start each worker with a Go profiling endpoint (/debug/pprof/) on 127.0.0.1 at a free port, recorded in <run-dir>/worker-wN.pprof (koala bench --profile reads it)")

	prep := func() (local.Config, error) { return prepStack(cfg) }
	// verb is one `koala stack` subcommand: it resolves the flags into a
	// validated config and hands it, with a context that ends on SIGINT or
	// SIGTERM, to run.
	verb := func(use, short string, run func(ctx context.Context, cmd *cobra.Command, c local.Config) error) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := prep()
				if err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return run(ctx, cmd, c)
			},
		}
	}

	cmd.AddCommand(verb("install", "Install what the stack needs and is missing (temporal CLI, Kafka libs, clickhouse-server)",
		func(ctx context.Context, _ *cobra.Command, c local.Config) error { return local.Install(ctx, c) }))
	cmd.AddCommand(verb("up", "Install what is missing, start every service not running, wait until ready",
		func(ctx context.Context, cmd *cobra.Command, c local.Config) error {
			if err := local.Up(ctx, c); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "stack up (run dir %s)\n", c.RunDir)
			fmt.Fprintf(out, "  %s=%s\n  %s=%s\n  %s=%s\n  %s=%s\n",
				envTemporal, c.TemporalAddr(), envNATS, c.NATSURL(),
				envKafka, c.KafkaBrokers()[0], envClickHouse, c.ClickHouseURL())
			fmt.Fprintf(out, "Temporal UI: %s\n", c.TemporalUIURL())
			if c.UI {
				fmt.Fprintf(out, "koala UI:    %s\n", c.UIURL())
			}
			return nil
		}))
	cmd.AddCommand(verb("down", "Stop every process started under the run dir (SIGTERM, then SIGKILL) and remove PID files",
		func(_ context.Context, _ *cobra.Command, c local.Config) error { return local.Down(c) }))
	cmd.AddCommand(verb("status", "Print every service with its pid, whether it runs, its address and log",
		func(_ context.Context, cmd *cobra.Command, c local.Config) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPID\tRUNNING\tADDR\tLOG")
			for _, s := range local.Status(c) {
				pid := "-"
				if s.PID != 0 {
					pid = strconv.Itoa(s.PID)
				}
				fmt.Fprintf(tw, "%s\t%s\t%t\t%s\t%s\n", s.Name, pid, s.Running, s.Addr, s.Log)
			}
			return tw.Flush()
		}))
	return cmd
}

// addStackFlags registers the flags that locate a local stack (home, run
// dir, ports, workers) on f; `koala soak` takes the same ones.
func addStackFlags(f *pflag.FlagSet, cfg *local.Config) {
	f.StringVar(&cfg.Home, "home", cfg.Home, "install cache (temporal CLI, Kafka libs) [$"+envHome+"]")
	f.StringVar(&cfg.RunDir, "run-dir", "", "PID, log and data files (default <home>/run)")
	f.StringVar(&cfg.Kafka, "kafka", cfg.Kafka, "Kafka broker: real (Apache Kafka from Maven Central) or embedded (franz-go kfake, no install)")
	f.IntVar(&cfg.TemporalPort, "temporal-port", cfg.TemporalPort, "Temporal frontend gRPC port")
	f.IntVar(&cfg.TemporalUIPort, "temporal-ui-port", cfg.TemporalUIPort, "Temporal web UI port")
	f.IntVar(&cfg.NATSPort, "nats-port", cfg.NATSPort, "NATS client port")
	f.IntVar(&cfg.KafkaPort, "kafka-port", cfg.KafkaPort, "Kafka broker port")
	f.IntVar(&cfg.KafkaControllerPort, "kafka-controller-port", cfg.KafkaControllerPort, "Kafka KRaft controller port (real mode)")
	f.IntVar(&cfg.ClickHouseHTTPPort, "clickhouse-http-port", cfg.ClickHouseHTTPPort, "ClickHouse HTTP port")
	f.IntVar(&cfg.ClickHouseTCPPort, "clickhouse-tcp-port", cfg.ClickHouseTCPPort, "ClickHouse native TCP port")
	f.StringVar(&cfg.KoalaBinary, "koala-binary", cfg.KoalaBinary, "koala binary that runs nats-server, kafka-fake, controller and workers")
	f.IntVar(&cfg.Workers, "workers", cfg.Workers, "number of koala worker processes (ids w1..wN)")
	f.BoolVar(&cfg.Controller, "controller", cfg.Controller, "run the koala controller")
}

// prepStack resolves the flags into a validated stack config.
func prepStack(cfg local.Config) (local.Config, error) {
	if cfg.RunDir == "" {
		cfg.RunDir = cfg.Home + "/run"
	}
	cfg.NATSSecurity = natsSecurityFromEnv()
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}
