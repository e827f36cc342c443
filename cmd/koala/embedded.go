package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Embedded servers: the local stack runs these as plain processes so that
// NATS (always) and Kafka (in --kafka=embedded mode) need no install.

func init() {
	rootCmd.AddCommand(newNATSServerCmd(), newKafkaFakeCmd())
}

func newNATSServerCmd() *cobra.Command {
	var addr string
	var debug bool
	cmd := &cobra.Command{
		Use:   "nats-server",
		Short: "Run an embedded NATS server (no JetStream) until SIGTERM/SIGINT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, port, err := embeddedSplitHostPort(addr)
			if err != nil {
				return fmt.Errorf("nats-server: --addr: %w", err)
			}
			opts := &natsserver.Options{
				ServerName: "koala-nats",
				Host:       host,
				Port:       port,
				HTTPPort:   0, // no monitoring endpoint
				JetStream:  false,
				NoSigs:     true, // we handle signals ourselves
				Debug:      debug,
				Logtime:    true,
				MaxPayload: 8 << 20,
			}
			ns, err := natsserver.NewServer(opts)
			if err != nil {
				return fmt.Errorf("nats-server: %w", err)
			}
			ns.ConfigureLogger() // logs to stderr
			ns.Start()
			if !ns.ReadyForConnections(10 * time.Second) {
				ns.Shutdown()
				return fmt.Errorf("nats-server: not ready for connections on %s after 10s", addr)
			}
			fmt.Fprintf(os.Stderr, "nats-server ready on nats://%s\n", addr)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			<-ctx.Done()
			fmt.Fprintln(os.Stderr, "nats-server shutting down")
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", embeddedHostPort(envOr(envNATS, defNATS)), "host:port to listen on")
	cmd.Flags().BoolVar(&debug, "debug", false, "log protocol debug messages")
	return cmd
}

func newKafkaFakeCmd() *cobra.Command {
	var addr string
	var partitions int
	cmd := &cobra.Command{
		Use:   "kafka-fake",
		Short: "Run an in-process, in-memory Kafka-protocol broker (franz-go kfake) until SIGTERM/SIGINT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, port, err := embeddedSplitHostPort(addr)
			if err != nil {
				return fmt.Errorf("kafka-fake: --addr: %w", err)
			}
			if host != "127.0.0.1" {
				return fmt.Errorf("kafka-fake: --addr host must be 127.0.0.1 (kfake binds only there), got %q", host)
			}
			cluster, err := kfake.NewCluster(
				kfake.Ports(port),
				kfake.NumBrokers(1),
				kfake.AllowAutoTopicCreation(),
				kfake.DefaultNumPartitions(partitions),
			)
			if err != nil {
				return fmt.Errorf("kafka-fake: %w", err)
			}
			fmt.Fprintf(os.Stderr, "kafka-fake ready on %s\n", addr)
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			<-ctx.Done()
			fmt.Fprintln(os.Stderr, "kafka-fake shutting down")
			cluster.Close()
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", defKafka, "127.0.0.1:port to listen on")
	cmd.Flags().IntVar(&partitions, "partitions", 4, "partitions of auto-created topics")
	return cmd
}

func embeddedSplitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q in %q", p, addr)
	}
	return host, port, nil
}

// embeddedHostPort strips a URL scheme ("nats://h:p" -> "h:p").
func embeddedHostPort(u string) string {
	for i := 0; i+2 < len(u); i++ {
		if u[i:i+3] == "://" {
			return u[i+3:]
		}
	}
	return u
}
