package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"koala/dataplane/transport"
	"koala/statesvc"
)

// Environment variables of `koala statesvc`.
const (
	envStateListen = "KOALA_STATESVC_LISTEN" // host:port the state service binds
	envStateDir    = "KOALA_STATESVC_DIR"    // its Pebble directory
)

func init() {
	var opts statesvc.ServerOptions
	var grace time.Duration
	var tlsOpts transport.GRPCTLS
	cmd := &cobra.Command{
		Use:   "statesvc",
		Short: "Run the remote state service (Pebble behind gRPC) for the remote-pebble backend",
		Long: "Serves one Pebble store over gRPC (service koala.State) until SIGTERM or interrupt,\n" +
			"then stops gracefully. Jobs with StateBackend remote-pebble name one or more of these\n" +
			"services in their RemotePebbleAddrs parameter; keys are sharded by bucket over them\n" +
			"and namespaced by job id, so jobs sharing the services never see each other's state.\n" +
			"It binds 127.0.0.1 unless --listen names a host; beyond loopback, serve it with TLS\n" +
			"(--grpc-tls-cert/--grpc-tls-key) and --grpc-tls-mutual so only clients holding a\n" +
			"certificate signed by --grpc-tls-ca get in.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Dir == "" {
				return fmt.Errorf("statesvc: --dir (or %s) is required", envStateDir)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			opts.Logger = log
			creds, err := tlsOpts.ServerCredentials()
			if err != nil {
				return fmt.Errorf("statesvc: %w", err)
			}
			opts.Creds = creds
			srv, err := statesvc.NewServer(opts)
			if err != nil {
				return err
			}
			log.Info("state service listening", "addr", srv.Addr(), "dir", opts.Dir, "tls", tlsOpts.Enabled(), "mutual_tls", tlsOpts.Mutual)
			served := make(chan error, 1)
			go func() { served <- srv.Wait() }()
			select {
			case <-ctx.Done():
				log.Info("state service stopping", "grace", grace)
			case err := <-served:
				_ = srv.Close()
				return fmt.Errorf("statesvc: serving stopped: %w", err)
			}
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				return err
			}
			log.Info("state service stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Listen, "listen", envOr(envStateListen, statesvc.DefaultServerListen), "host:port to listen on; a missing host means 127.0.0.1 (env "+envStateListen+")")
	f.StringVar(&opts.Dir, "dir", envOr(envStateDir, ""), "Pebble directory (env "+envStateDir+")")
	f.DurationVar(&grace, "grace", 10*time.Second, "how long running calls may finish on shutdown")
	addGRPCTLSFlags(f, &tlsOpts)
	rootCmd.AddCommand(cmd)
}
