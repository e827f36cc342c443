package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"koala/dataplane"
	_ "koala/queries"
	_ "koala/queries/examples" // example queries
	_ "koala/queries/nexmark"  // Nexmark generator and queries // registers the query operators this worker can run
	_ "koala/queries/traces"   // azure, borg, taxi and twitch trace queries and generators
)

func init() {
	var opts dataplane.Options
	var chURL, pprofAddr, pprofFile string
	var chNative string
	var gcPercent int
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a data-plane worker hosting task slots",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			opts.Logger = log
			resolveNATSSecrets(&opts.NATSSecurity)
			if opts.ID == "" {
				host, _ := os.Hostname()
				opts.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			if err := setWorkerGC(gcPercent, cmd.Flags().Changed("gogc"), log); err != nil {
				return err
			}
			if pprofAddr != "" {
				bound, closePprof, err := servePprof(pprofAddr, log)
				if err != nil {
					return err
				}
				defer closePprof()
				log.Info("pprof endpoint", "addr", bound)
				if pprofFile != "" {
					remove, err := writePprofAddr(pprofFile, bound)
					if err != nil {
						return err
					}
					defer remove()
				}
			} else if pprofFile != "" {
				return fmt.Errorf("--pprof-addr-file %q without --pprof-listen: there is no endpoint whose address could be written", pprofFile)
			}
			ch, err := openClickHouse(ctx, chURL, chNative, log)
			if err != nil {
				return err
			}
			if ch != nil {
				ch.Start(ctx)
				defer closeClickHouse(ch)
				opts.Recorder = ch
			}
			w, err := dataplane.NewWorker(opts)
			if err != nil {
				return err
			}
			return w.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ID, "id", envOr(envWorkerID, ""), "worker id, unique in the cluster (env "+envWorkerID+"; default host-pid)")
	f.StringVar(&opts.NATSURL, "nats", envOr(envNATS, defNATS), "NATS URL (env "+envNATS+")")
	f.StringVar(&opts.Listen, "listen", envOr(envListen, defListen), "data-plane gRPC listen address (env "+envListen+")")
	f.StringVar(&opts.DataDir, "data-dir", envOr(envDataDir, ""), "directory for task state (env "+envDataDir+")")
	f.IntVar(&opts.Slots, "slots", 0, "task slots (0 = unlimited)")
	addNATSSecurityFlags(f, &opts.NATSSecurity)
	addGRPCTLSFlags(f, &opts.GRPCTLS)
	f.StringVar(&chURL, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL for metrics, or \"none\" (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	f.IntVar(&gcPercent, "gogc", defaultWorkerGCPercent, "Go GC target percentage of the worker (like GOGC; the GOGC environment variable wins unless this flag is given)")
	f.StringVar(&pprofAddr, "pprof-listen", envOr(envPprof, ""), "serve Go runtime profiles (/debug/pprof/) on this host:port, e.g. 127.0.0.1:0 (env "+envPprof+"; empty: off)")
	f.StringVar(&pprofFile, "pprof-addr-file", envOr(envPprofFile, ""), "write the bound --pprof-listen address to this file and remove it on exit (env "+envPprofFile+"; empty: don't)")
	rootCmd.AddCommand(cmd)
}
