package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"koala/deploy/local"
	"koala/experiments/ui"
)

func init() { rootCmd.AddCommand(newUICmd()) }

// newUICmd is `koala ui`: the live view of the running jobs, in the browser.
func newUICmd() *cobra.Command {
	cfg := local.DefaultConfig()
	var addr string
	var port int
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a live view of the running jobs: tasks per worker, rates, lag, routing epochs, reconfigurations",
		Long: `ui serves, on 127.0.0.1:8280 by default, a page per running job of the local
stack (same --home/--run-dir/port flags as ` + "`koala stack`" + `): its operators with
their tasks per worker, each task's input rate, busy/idle share and Kafka
lag (charts refreshed every second), the routing epoch per operator, a
running reconfiguration's protocol, step, keys and bytes still to migrate
and migration rate, and a timeline of past reconfigurations with links into
the Temporal UI. /api/jobs and /api/jobs/{id} serve the same data as JSON.
It reads the workers over NATS and the metrics in ClickHouse.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			listen, err := uiListenAddr(addr, port, cmd.Flags().Changed("port"))
			if err != nil {
				return err
			}
			c, err := prepStack(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runUI(ctx, c, listen, cmd)
		},
	}
	f := cmd.Flags()
	addStackFlags(f, &cfg)
	for _, n := range []string{"kafka", "kafka-port", "kafka-controller-port", "koala-binary", "workers", "controller", "temporal-port"} {
		_ = f.MarkHidden(n) // stack flags the view has no use for
	}
	f.StringVar(&addr, "addr", ui.DefaultAddr, "host:port to listen on")
	f.IntVar(&port, "port", 0, "port to listen on at the --addr host (overrides the --addr port; 0: keep it)")
	return cmd
}

// uiListenAddr is --addr with the port replaced by --port when given.
func uiListenAddr(addr string, port int, portSet bool) (string, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w; allowed: host:port, e.g. %s", addr, err, ui.DefaultAddr)
	}
	if portSet {
		if port < 1 || port > 65535 {
			return "", fmt.Errorf("--port %d: out of range; allowed: 1..65535", port)
		}
		p = strconv.Itoa(port)
	}
	return net.JoinHostPort(host, p), nil
}

func runUI(ctx context.Context, c local.Config, listen string, cmd *cobra.Command) error {
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	nc, err := dialNATS(c.NATSURL(), c.NATSSecurity, "koala-ui")
	if err != nil {
		return err
	}
	defer nc.Close()
	workers, err := ui.NewNATSWorkers(nc, 0)
	if err != nil {
		return err
	}
	defer workers.Close()
	ch, err := newClickHouse(c.ClickHouseURL(), c.ClickHouseNativeAddr())
	if err != nil {
		return err
	}
	defer closeClickHouse(ch)
	srv, err := ui.NewServer(ui.Config{
		Workers: workers, Metrics: ch, TemporalUI: envOr(envTemporalUI, c.TemporalUIURL()),
		Namespace: envOr(envNamespace, defNamespace), Log: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("koala ui: listen on %s: %w", listen, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s http://%s\n", local.UIReadyLine, ln.Addr())
	return srv.Serve(ctx, ln)
}
