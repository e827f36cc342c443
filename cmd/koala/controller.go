package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"koala/activities"
	"koala/dataplane/metrics"
	"koala/dataplane/transport"
	"koala/workflows"
)

func init() {
	var temporalAddr, namespace, natsURL, chURL string
	var chNative string
	var natsSec transport.NATSSecurity
	var grpcTLS transport.GRPCTLS // to remote state servers (dropping a finished job's state)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the control plane: the Temporal worker for experiment and reconfiguration workflows",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			tc, err := dialTemporal(ctx, temporalAddr, namespace)
			if err != nil {
				return err
			}
			defer tc.Close()
			resolveNATSSecrets(&natsSec)
			nc, err := dialNATS(natsURL, natsSec, "koala-controller")
			if err != nil {
				return err
			}
			defer nc.Close()
			stateCreds, err := grpcTLS.ClientCredentials()
			if err != nil {
				return err
			}
			acts := &activities.Activities{NC: nc, Logger: log, StateCreds: stateCreds}
			if ch, err := openClickHouse(ctx, chURL, chNative, log); err != nil {
				return err
			} else if ch != nil {
				ch.Start(ctx)
				defer closeClickHouse(ch)
				acts.Metrics, acts.Events = ch, ch
			}
			w := worker.New(tc, workflows.TaskQueue, worker.Options{})
			workflows.Register(w)
			w.RegisterActivity(acts)
			w.RegisterActivity(newAutoscalerActivities(tc, acts.Metrics, log)) // autoscale.go
			if err := w.Start(); err != nil {
				return fmt.Errorf("start Temporal worker on task queue %s: %w", workflows.TaskQueue, err)
			}
			defer w.Stop()
			fmt.Fprintf(os.Stderr, "controller ready (temporal %s, task queue %s, nats %s)\n", temporalAddr, workflows.TaskQueue, transport.RedactURL(natsURL))
			<-ctx.Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&temporalAddr, "temporal", envOr(envTemporal, defTemporal), "Temporal frontend host:port (env "+envTemporal+")")
	f.StringVar(&namespace, "namespace", envOr(envNamespace, defNamespace), "Temporal namespace (env "+envNamespace+")")
	f.StringVar(&natsURL, "nats", envOr(envNATS, defNATS), "NATS URL (env "+envNATS+")")
	f.StringVar(&chURL, "clickhouse", envOr(envClickHouse, defClickHouse), "ClickHouse HTTP URL, or \"none\" (env "+envClickHouse+")")
	clickHouseNativeFlag(f, &chNative)
	addNATSSecurityFlags(f, &natsSec)
	addGRPCTLSFlags(f, &grpcTLS)
	rootCmd.AddCommand(cmd)
}

// dialTemporal connects within a few seconds or names the address it could not reach.
func dialTemporal(ctx context.Context, addr, namespace string) (client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: namespace, Logger: quietTemporalLogger()})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s): %w — is `koala stack up` running?", addr, namespace, err)
	}
	return c, nil
}

// dialNATS connects with sec; its error names the address, never the credentials.
func dialNATS(url string, sec transport.NATSSecurity, name string) (*nats.Conn, error) {
	nc, err := transport.ConnectNATS(url, sec, nats.Name(name), nats.Timeout(3*time.Second), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("%w — is `koala stack up` running?", err)
	}
	return nc, nil
}

// openClickHouse returns nil when metrics are disabled with "none" or "".
// It creates the tables, over the native interface at native.
func openClickHouse(ctx context.Context, url, native string, log *slog.Logger) (*metrics.ClickHouse, error) {
	if url == "" || url == "none" {
		return nil, nil
	}
	ch, err := newClickHouse(url, native, metrics.WithLogger(log))
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ch.PingHTTP(sctx); err != nil {
		return nil, fmt.Errorf("ClickHouse at %s: %w (set --clickhouse=none to run without metrics)", url, err)
	}
	if err := ch.EnsureSchema(sctx); err != nil {
		return nil, fmt.Errorf("ClickHouse at %s (native %s): %w (set --clickhouse=none to run without metrics)", url, native, err)
	}
	return ch, nil
}

func closeClickHouse(ch *metrics.ClickHouse) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ch.Close(ctx)
}

func quietTemporalLogger() *slogAdapter {
	return &slogAdapter{slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

// slogAdapter makes slog the Temporal SDK's logger, at warning level by default.
type slogAdapter struct{ l *slog.Logger }

func (s *slogAdapter) Debug(msg string, kv ...any) { s.l.Debug(msg, kv...) }
func (s *slogAdapter) Info(msg string, kv ...any)  { s.l.Info(msg, kv...) }
func (s *slogAdapter) Warn(msg string, kv ...any)  { s.l.Warn(msg, kv...) }
func (s *slogAdapter) Error(msg string, kv ...any) { s.l.Error(msg, kv...) }
