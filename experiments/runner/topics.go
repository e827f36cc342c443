package runner

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dropTimeout bounds deleting a run's topics: a broker that does not answer
// must not hold up the next run.
const dropTimeout = 30 * time.Second

// RunTopics are the topics of a run whose input topic is topic: the topic
// itself and those named "<topic>-<suffix>" (its Kafka sinks and dead
// letters), out of names.
func RunTopics(names []string, topic string) []string {
	if topic == "" {
		return nil
	}
	var out []string
	for _, n := range names {
		if n == topic || strings.HasPrefix(n, topic+"-") {
			out = append(out, n)
		}
	}
	return out
}

// DropRunTopics deletes the Kafka topics of a finished run once its results
// are read: a comparison at 100 K ev/s writes GBs per run, and a broker that
// keeps every run fills the disk within a few comparisons. It reports what
// it dropped to out; a failure is reported, not returned, as the run's
// results are already kept.
func DropRunTopics(ctx context.Context, out io.Writer, brokers []string, topic string) {
	if len(brokers) == 0 || topic == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, dropTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		fmt.Fprintf(out, "  topics of %s kept: kafka client for %v: %v\n", topic, brokers, err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	listed, err := adm.ListTopics(ctx)
	if err != nil {
		fmt.Fprintf(out, "  topics of %s kept: list topics: %v\n", topic, err)
		return
	}
	topics := RunTopics(listed.Names(), topic)
	if len(topics) == 0 {
		return
	}
	var size uint64
	if dirs, err := adm.DescribeAllLogDirs(ctx, nil); err == nil {
		mine := map[string]bool{}
		for _, t := range topics {
			mine[t] = true
		}
		dirs.Each(func(d kadm.DescribedLogDir) {
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if mine[p.Topic] {
					size += uint64(max(p.Size, 0))
				}
			})
		})
	}
	resp, err := adm.DeleteTopics(ctx, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		fmt.Fprintf(out, "  topics of %s kept: delete %v: %v\n", topic, topics, err)
		return
	}
	fmt.Fprintf(out, "  dropped the run's %d Kafka topic(s) (%s): %s\n", len(topics), gbText(size), strings.Join(topics, ", "))
}
