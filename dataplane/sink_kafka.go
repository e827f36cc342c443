package dataplane

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
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
// default), so its internal retries do not duplicate records. That makes
// the sink at least once: records written after the last checkpoint are
// written again when a recovery replays them. With checkpoints the sink
// writes transactionally and is exactly once for read_committed consumers
// (kafkaio/txn.go, which also says what that costs in latency).

func init() {
	MustRegisterOperator(control.KindKafkaSink, func(ctx OperatorContext) (Operator, error) {
		return NewKafkaSinkFactory(KafkaSinkTopic(ctx.Job, ctx.Spec.Name))(ctx)
	})
}

// KafkaSinkTopic is the topic KindKafkaSink operator op of job writes to
// when the job sets no ParamKafkaSinkTopic.
func KafkaSinkTopic(job control.JobSpec, op string) string {
	if p := strings.TrimSpace(job.Params[control.ParamKafkaSinkTopic]); p != "" {
		return p
	}
	return job.Topic + "-" + op
}

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
		if p := strings.TrimSpace(ctx.Job.Params[control.ParamKafkaSinkTopic]); p != "" {
			t = p
		}
		if t == "" {
			return nil, fmt.Errorf("kafka sink %q: no topic (give one to KafkaSink or set job param %s)", ctx.Spec.Name, control.ParamKafkaSinkTopic)
		}
		brokers := ctx.Job.KafkaBrokers
		if p := ctx.Job.Params[control.ParamKafkaSinkBrokers]; p != "" {
			brokers = nil
			for _, b := range strings.Split(p, ",") {
				if b = strings.TrimSpace(b); b != "" {
					brokers = append(brokers, b)
				}
			}
		}
		if len(brokers) == 0 {
			return nil, fmt.Errorf("kafka sink %q: no brokers (job param %s %q and the job's brokers are empty)", ctx.Spec.Name, control.ParamKafkaSinkBrokers, ctx.Job.Params[control.ParamKafkaSinkBrokers])
		}
		dead := ctx.DeadLetters
		if dead == nil {
			dead = kafkaio.NewTestDeadLetters(ctx.Spec.Name)
		}
		opts := []kgo.Opt{
			kgo.SeedBrokers(brokers...),
			kgo.DefaultProduceTopic(t),
			kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
			kgo.AllowAutoTopicCreation(),
			// A batch must hold the largest record the job lets through.
			kgo.ProducerBatchMaxBytes(int32(min(dead.MaxRecordBytes()+(64<<10), math.MaxInt32))),
		}
		cctx, cancel := context.WithCancel(context.Background())
		k := &kafkaSink{name: ctx.Spec.Name, topic: t, dead: dead, ctx: cctx, cancel: cancel}
		if loc := ctx.Job.Params[control.ParamCheckpointStore]; loc != "" {
			store, err := checkpoint.Open(loc)
			if err != nil {
				cancel()
				return nil, fmt.Errorf("kafka sink %q: %w", ctx.Spec.Name, err)
			}
			jobID := ctx.Job.JobID
			k.txn = kafkaio.NewTxn("koala/"+jobID+"/"+ctx.TaskID, opts,
				func(ctx context.Context, id string) (bool, error) { return store.Completed(ctx, jobID, id) })
			return k, nil
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("kafka sink %q: client for %v: %w", ctx.Spec.Name, brokers, err)
		}
		k.client = cl
		return k, nil
	}
}

type kafkaSink struct {
	name, topic string
	client      *kgo.Client  // without checkpoints
	txn         *kafkaio.Txn // with checkpoints (kafkaio.Txn)
	dead        *kafkaio.DeadLetters
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
			k.dead.Reject(*r, kafkaio.ReasonOversize, fmt.Errorf("%d bytes of key and value exceed %s %d", len(r.Key)+len(r.Value), control.ParamMaxRecordBytes, k.dead.MaxRecordBytes()))
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
	ctx, cancel := context.WithTimeout(k.ctx, kafkaio.DeliveryTimeout)
	var err error
	if k.txn != nil {
		err = k.txn.Write(ctx, recs)
	} else {
		err = k.client.ProduceSync(ctx, recs...).FirstErr()
	}
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
	if k.txn != nil {
		return k.txn.Close()
	}
	k.client.Close()
	return nil
}

// Two-phase commit with checkpoints (twoPhaseSink); without checkpoints
// each is a no-op. Each Kafka call is bounded by kafkaio.DeliveryTimeout.

func (k *kafkaSink) transactional() bool { return k.txn != nil }

func (k *kafkaSink) preCommit(ctx context.Context, id, dir string) (uint64, error) {
	if k.txn == nil {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, kafkaio.DeliveryTimeout)
	defer cancel()
	n, err := k.txn.PreCommit(ctx, id, dir)
	if err != nil {
		return n, fmt.Errorf("kafka sink %q: %w", k.name, err)
	}
	return n, nil
}

func (k *kafkaSink) commitCheckpoint(ctx context.Context, id string) error {
	return k.txnStep(ctx, func(ctx context.Context) error { return k.txn.Commit(ctx, id) })
}

func (k *kafkaSink) abortCheckpoint(ctx context.Context, id string) error {
	return k.txnStep(ctx, func(ctx context.Context) error { return k.txn.Abort(ctx, id) })
}

func (k *kafkaSink) finishInput(ctx context.Context) error {
	return k.txnStep(ctx, func(ctx context.Context) error { return k.txn.Finish(ctx) })
}

func (k *kafkaSink) restoreCheckpoint(ctx context.Context, dir string) error {
	return k.txnStep(ctx, func(ctx context.Context) error { return k.txn.Restore(ctx, dir) })
}

func (k *kafkaSink) txnStep(ctx context.Context, fn func(context.Context) error) error {
	if k.txn == nil {
		return nil
	}
	// Not cancelled with the request that asked for it: an EndTxn cut off
	// in flight leaves the transaction's outcome unknown.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kafkaio.DeliveryTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		return fmt.Errorf("kafka sink %q: %w", k.name, err)
	}
	return nil
}
