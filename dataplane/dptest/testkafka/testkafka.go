// Package testkafka reads what tests wrote to a Kafka topic (kfake or a
// real broker), for tests below the runtime as well as the runtime's own.
package testkafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadTopic consumes topic from the start until it holds want records
// (polling with a deadline) and returns them per partition in offset order.
func ReadTopic(t testing.TB, brokers []string, topic string, want int) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	for n < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			n++
		})
	}
	if n != want {
		t.Fatalf("topic %s holds %d records, want %d", topic, n, want)
	}
	return out
}
