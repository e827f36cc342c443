package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

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
			if net.ParseIP(host) == nil {
				return fmt.Errorf("kafka-fake: --addr host %q: want an IP address such as 127.0.0.1", host)
			}
			cluster, err := kfake.NewCluster(
				kfake.Ports(port),
				// kfake asks for 127.0.0.1:port; bind the configured host
				// instead, which it then advertises in metadata.
				kfake.ListenFn(func(network, address string) (net.Listener, error) {
					_, p, err := net.SplitHostPort(address)
					if err != nil {
						return nil, err
					}
					return net.Listen(network, net.JoinHostPort(host, p))
				}),
				kfake.NumBrokers(1),
				kfake.AllowAutoTopicCreation(),
				kfake.DefaultNumPartitions(partitions),
			)
			if err != nil {
				return fmt.Errorf("kafka-fake: %w", err)
			}
			fmt.Fprintf(os.Stderr, "kafka-fake ready on %s\n", addr)
			waitForStop("kafka-fake")
			cluster.Close()
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", defKafka, "IP:port to listen on and advertise (unauthenticated: keep it on loopback or a private network)")
	cmd.Flags().IntVar(&partitions, "partitions", 4, "partitions of auto-created topics")
	return cmd
}

func embeddedSplitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 { // -1: a free port (NATS)
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

// waitForStop returns on SIGTERM or SIGINT, saying that name shuts down.
func waitForStop(name string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, name+" shutting down")
}
