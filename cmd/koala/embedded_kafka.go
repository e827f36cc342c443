package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"koala/deploy/embedded"

	"github.com/spf13/cobra"
)

func newKafkaFakeCmd() *cobra.Command {
	var addr string
	var partitions int
	cmd := &cobra.Command{
		Use:   "kafka-fake",
		Short: "Run an in-process, in-memory Kafka-protocol broker (franz-go kfake) until SIGTERM/SIGINT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cluster, err := embedded.StartKafka(addr, partitions)
			if err != nil {
				return err
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

// waitForStop returns on SIGTERM or SIGINT, saying that name shuts down.
func waitForStop(name string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, name+" shutting down")
}
