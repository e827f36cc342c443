package dataplane

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka sink
//
// The sink writes each record's key and value to a Kafka topic with the
// record's event time as the Kafka timestamp. Records of one key go to one
// partition (key hash), in the order the sink task receives them, which is
// the key's order in the stream. Each processing batch is written with one
// ProduceSync call: ProcessBatch returns only when Kafka acknowledged the
// whole batch, so a barrier, which the task handles after the batch, never
// overtakes records still in flight. The producer is idempotent (franz-go's
// default), so its internal retries do not duplicate records.

// Job params of Kafka sinks.
const (
	// ParamKafkaSinkTopic overrides the topic a query's Kafka sinks write to.
	ParamKafkaSinkTopic = "KafkaSinkTopic"
	// ParamKafkaSinkBrokers lists the sink's brokers, comma-separated
	// (default: the job's brokers).
	ParamKafkaSinkBrokers = "KafkaSinkBrokers"
)

// KafkaSink ends the stream in a Kafka topic (see NewKafkaSinkFactory).
func (s *Stream) KafkaSink(name, topic string) *QueryBuilder {
	s.then(name, NewKafkaSinkFactory(topic), false)
	return s.q
}

// NewKafkaSinkFactory returns the factory of a sink writing to topic, or to
// the job's ParamKafkaSinkTopic when set. Records larger than the job's
// MaxRecordBytes go to the dead-letter path instead.
func NewKafkaSinkFactory(topic string) OperatorFactory {
	return func(ctx OperatorContext) (Operator, error) {
		t := topic
		if p := strings.TrimSpace(ctx.Job.Params[ParamKafkaSinkTopic]); p != "" {
			t = p
		}
		if t == "" {
			return nil, fmt.Errorf("kafka sink %q: no topic (give one to KafkaSink or set job param %s)", ctx.Spec.Name, ParamKafkaSinkTopic)
		}
		brokers := ctx.Job.KafkaBrokers
		if p := ctx.Job.Params[ParamKafkaSinkBrokers]; p != "" {
			brokers = nil
			for _, b := range strings.Split(p, ",") {
				if b = strings.TrimSpace(b); b != "" {
					brokers = append(brokers, b)
				}
			}
		}
		if len(brokers) == 0 {
			return nil, fmt.Errorf("kafka sink %q: no brokers (job param %s %q and the job's brokers are empty)", ctx.Spec.Name, ParamKafkaSinkBrokers, ctx.Job.Params[ParamKafkaSinkBrokers])
		}
		dead := ctx.DeadLetters
		if dead == nil {
			dead = NewTestDeadLetters(ctx.Spec.Name)
		}
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(brokers...),
			kgo.DefaultProduceTopic(t),
			kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
			kgo.AllowAutoTopicCreation(),
			// A batch must hold the largest record the job lets through.
			kgo.ProducerBatchMaxBytes(int32(min(dead.MaxRecordBytes()+(64<<10), math.MaxInt32))),
		)
		if err != nil {
			return nil, fmt.Errorf("kafka sink %q: client for %v: %w", ctx.Spec.Name, brokers, err)
		}
		cctx, cancel := context.WithCancel(context.Background())
		return &kafkaSink{name: ctx.Spec.Name, topic: t, client: cl, dead: dead, ctx: cctx, cancel: cancel}, nil
	}
}

// sinkDeliveryTimeout bounds how long a Kafka sink or dead-letter write
// waits, so an unreachable cluster fails the task instead of blocking it.
// (kgo.RecordDeliveryTimeout cannot be used: franz-go measures it from the
// record's timestamp, which is the event time here, often long past.)
const sinkDeliveryTimeout = time.Minute

type kafkaSink struct {
	name, topic string
	client      *kgo.Client
	dead        *DeadLetters
	ctx         context.Context // cancelled by Close, so a stopping task does not wait for Kafka
	cancel      context.CancelFunc
	recs        []*kgo.Record // reused across batches
	written     atomic.Uint64
}

// ProcessBatch writes in and waits for Kafka's acknowledgement.
func (k *kafkaSink) ProcessBatch(in []Record, _ Emit) error {
	if cap(k.recs) < len(in) {
		k.recs = make([]*kgo.Record, 0, len(in))
	}
	recs := k.recs[:0]
	for i := range in {
		r := &in[i]
		if k.dead.TooLarge(*r) {
			k.dead.Reject(*r, ReasonOversize, fmt.Errorf("%d bytes of key and value exceed %s %d", len(r.Key)+len(r.Value), ParamMaxRecordBytes, k.dead.MaxRecordBytes()))
			continue
		}
		kr := &kgo.Record{Key: r.Key, Value: r.Value}
		if r.EventTime > 0 {
			kr.Timestamp = time.Unix(0, r.EventTime)
		}
		recs = append(recs, kr)
	}
	if len(recs) == 0 {
		return nil
	}
	n := len(recs)
	ctx, cancel := context.WithTimeout(k.ctx, sinkDeliveryTimeout)
	err := k.client.ProduceSync(ctx, recs...).FirstErr()
	cancel()
	clear(recs)
	k.recs = recs[:0]
	if err != nil {
		return fmt.Errorf("kafka sink %q: write to topic %s: %w", k.name, k.topic, err)
	}
	k.written.Add(uint64(n))
	return nil
}

// Counters implements CounterReporter.
func (k *kafkaSink) Counters() map[string]uint64 {
	return map[string]uint64{"kafka_sink_written": k.written.Load()}
}

// Close implements Closer.
func (k *kafkaSink) Close() error {
	k.cancel()
	k.client.Close()
	return nil
}
