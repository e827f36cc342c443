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

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/experiments/runner"
	_ "koala/queries"
	_ "koala/queries/examples" // example queries
	_ "koala/queries/nexmark"  // Nexmark generator and queries // registers query generators
	_ "koala/queries/traces"   // azure, borg, taxi and twitch trace queries and generators
)

func init() {
	var req control.ProduceRequest
	var kafka string
	var partitions, producers int
	var rateLimit, rateChange []int64
	var nexmark control.NexmarkSource
	cmd := &cobra.Command{
		Use:   "produce",
		Short: "Generate input records into a Kafka topic at a fixed rate or a rate schedule, with N parallel producers",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if req.Topic == "" {
				return errors.New("--topic is required")
			}
			if partitions < 1 {
				return fmt.Errorf("--partitions %d: must be ≥ 1", partitions)
			}
			if len(rateLimit) > 0 {
				sched := produce.RateSchedule{RateLimit: rateLimit, RateChangeInterval: rateChange}
				if err := sched.Validate(); err != nil {
					return fmt.Errorf("--rate-limit/--rate-change-interval: %w", err)
				}
				req.RateLimit, req.RateChangeInterval = rateLimit, rateChange
			}
			if nexmark.EventTypes != nil || nexmark.NumActivePeople != 0 || nexmark.OutputEventNumber != 0 ||
				nexmark.HotSellersRatio != 0 || nexmark.HotAuctionsRatio != 0 || nexmark.HotBiddersRatio != 0 || nexmark.Encoding != "" {
				req.Nexmark = &nexmark
			}
			if producers < 1 {
				return fmt.Errorf("--producers %d: must be ≥ 1", producers)
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
			return runner.Produce(ctx, req, producers)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kafka, "kafka", envOr(envKafka, defKafka), "Kafka bootstrap brokers (env "+envKafka+")")
	f.StringVar(&req.Topic, "topic", "", "topic to write (created when missing)")
	f.IntVar(&partitions, "partitions", 4, "partitions of a created topic")
	f.StringVar(&req.Generator, "generator", produce.DefaultGenerator, "input generator")
	f.IntVar(&req.RatePerSec, "rate", 1000, "records per second (0 = as fast as possible)")
	f.IntVar(&req.NumKeys, "keys", 1000, "distinct keys")
	f.Int64Var(&req.Seed, "seed", 1, "generator seed")
	f.Int64Var(&req.MaxEvents, "events", 0, "stop after this many records (0 = until interrupted)")
	f.IntVar(&req.ValueSize, "value-size", 64, "value bytes per record")
	f.IntVar(&producers, "producers", 1, "parallel producers; --rate and --events are split among them, each follows the whole --rate-limit schedule")
	f.Int64SliceVar(&rateLimit, "rate-limit", nil, "rate schedule: records per 200 ms interval per producer, e.g. 2000,4000 (replaces --rate)")
	f.Int64SliceVar(&rateChange, "rate-change-interval", nil, "how many 200 ms intervals each --rate-limit step lasts (the last step holds)")
	f.Float64Var(&req.Skew, "skew", 0, "Zipf exponent of the zipf generator")
	f.StringSliceVar(&req.FilePath, "file", nil, "trace CSV files to replay instead of generating (trace generators; dealt out among producers)")
	f.StringSliceVar(&nexmark.EventTypes, "nexmark-event-types", nil, "nexmark generator: only these kinds (Person, Auction, Bid)")
	f.IntVar(&nexmark.NumActivePeople, "nexmark-active-people", 0, "nexmark generator: NumActivePeople (0 = default)")
	f.IntVar(&nexmark.HotSellersRatio, "nexmark-hot-sellers-ratio", 0, "nexmark generator: HotSellersRatio (0 = default)")
	f.IntVar(&nexmark.HotAuctionsRatio, "nexmark-hot-auctions-ratio", 0, "nexmark generator: HotAuctionsRatio (0 = default)")
	f.IntVar(&nexmark.HotBiddersRatio, "nexmark-hot-bidders-ratio", 0, "nexmark generator: HotBiddersRatio (0 = default)")
	f.Int64Var(&nexmark.OutputEventNumber, "nexmark-output-event-number", 0, "nexmark generator: first event number (resume point after a warm-up)")
	f.StringVar(&nexmark.Encoding, "nexmark-encoding", "", "nexmark generator: record encoding, binary (default) or json")
	rootCmd.AddCommand(cmd)
}
