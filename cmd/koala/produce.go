package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane"
	"koala/dataplane/control"
	_ "koala/queries"
	_ "koala/queries/examples" // example queries
	_ "koala/queries/nexmark"  // Nexmark generator and queries // registers query generators
	_ "koala/queries/traces"   // azure, borg, taxi and twitch trace queries and generators
)

func init() {
	var req control.ProduceRequest
	var kafka string
	var partitions int
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Generate input records into a Kafka topic at a fixed rate",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Topic == "" {
				return errors.New("--topic is required")
			}
			if partitions < 1 {
				return fmt.Errorf("--partitions %d: must be ≥ 1", partitions)
			}
			req.KafkaBrokers = splitList(kafka)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cl, err := kgo.NewClient(kgo.SeedBrokers(req.KafkaBrokers...))
			if err != nil {
				return fmt.Errorf("kafka client for %s: %w", kafka, err)
			}
			resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(partitions), 1, nil, req.Topic)
			cl.Close()
			if err != nil {
				return fmt.Errorf("create topic %s on %s: %w", req.Topic, kafka, err)
			}
			if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("create topic %s: %w", req.Topic, resp.Err)
			}
			rep, err := dataplane.Produce(ctx, req, nil, func(r control.ProduceReport) {
				fmt.Fprintf(os.Stderr, "  %6.0fs acked %d failed %d\n", r.ElapsedSecs, r.Acked, r.Failed)
			})
			fmt.Printf("produced %d records to %s (%d failed) in %.1fs\n", rep.Acked, req.Topic, rep.Failed, rep.ElapsedSecs)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers (env "+envKafka+")")
	f.StringVar(&req.Topic, "topic", "", "topic to write (created when missing)")
	f.IntVar(&partitions, "partitions", 4, "partitions of a created topic")
	f.StringVar(&req.Generator, "generator", dataplane.DefaultGenerator, "input generator")
	f.IntVar(&req.RatePerSec, "rate", 1000, "records per second (0 = as fast as possible)")
	f.IntVar(&req.NumKeys, "keys", 1000, "distinct keys")
	f.Int64Var(&req.Seed, "seed", 1, "generator seed")
	f.Int64Var(&req.MaxEvents, "events", 0, "stop after this many records (0 = until interrupted)")
	f.IntVar(&req.ValueSize, "value-size", 64, "value bytes per record")
	rootCmd.AddCommand(cmd)
}
