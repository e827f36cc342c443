package kafkaio

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// Dead-letter path
//
// A record an operator cannot use (it does not parse, a field is missing,
// it is larger than the job's record size limit) must neither fail the task
// nor vanish. The operator hands it to its task's DeadLetters, which counts
// it by reason and, when the job names a dead-letter topic, writes it there
// with headers saying which operator and task rejected it and why;
// otherwise the record is skipped with a rate-limited log line. The runtime
// writes what was rejected during a batch before the batch's output is
// sent, so a barrier never overtakes a dead-lettered record.

// DefaultMaxRecordBytes is the record size limit without ParamMaxRecordBytes.
const DefaultMaxRecordBytes = 1 << 20

// maxMaxRecordBytes is the largest accepted ParamMaxRecordBytes (Kafka's own
// limits are far below it).
const maxMaxRecordBytes = 1 << 30

// Reasons a record is rejected (header HeaderReason).
const (
	ReasonMalformed = "malformed" // does not parse, or a required field is missing
	ReasonOversize  = "oversize"  // larger than the job's MaxRecordBytes
)

// Headers of a dead-lettered record.
const (
	HeaderOperator  = "koala-operator"
	HeaderTask      = "koala-task"
	HeaderReason    = "koala-reason"
	HeaderError     = "koala-error"
	HeaderPartition = "koala-source-partition" // input partition and offset, when known
	HeaderOffset    = "koala-source-offset"
	// HeaderOriginalBytes is set when the record was cut to MaxRecordBytes
	// (key first, then value) so it fits the dead-letter topic: the
	// original len(key)+len(value).
	HeaderOriginalBytes = "koala-original-bytes"
)

// DeliveryTimeout bounds how long a Kafka sink or dead-letter write
// waits, so an unreachable cluster fails the task instead of blocking it.
// (kgo.RecordDeliveryTimeout cannot be used: franz-go measures it from the
// record's timestamp, which is the event time here, often long past.)
const DeliveryTimeout = time.Minute

// deadLetterLogEvery is the minimum time between two log lines of one task
// about rejected records.
const deadLetterLogEvery = 10 * time.Second

// DeadLetterCounts are a task's rejected records so far.
type DeadLetterCounts struct {
	Malformed uint64 // rejected as ReasonMalformed (or an operator's own reason)
	Oversize  uint64 // rejected as ReasonOversize
	Written   uint64 // acknowledged by the dead-letter topic
	Failed    uint64 // could not be written to the dead-letter topic
}

// DeadLetters is one task's dead-letter path. Reject may be called from the
// task's goroutine (the operator's ProcessBatch); counts are safe to read
// from any goroutine.
type DeadLetters struct {
	operator, task string
	topic          string
	maxBytes       int
	opts           []kgo.Opt
	log            *slog.Logger

	malformed, oversize, written, failed atomic.Uint64

	mu        sync.Mutex
	client    *kgo.Client
	pending   []*kgo.Record
	told      time.Time
	toldTotal uint64
	closed    bool
}

// MaxRecordBytesOf reads ParamMaxRecordBytes of a job.
func MaxRecordBytesOf(job control.JobSpec) (int, error) {
	return control.IntParam(job, control.ParamMaxRecordBytes, DefaultMaxRecordBytes, 1, maxMaxRecordBytes, "bytes")
}

// NewDeadLetters builds the dead-letter path of one task. The Kafka client
// is created on the first record to write.
func NewDeadLetters(job control.JobSpec, operator, task string, extra []kgo.Opt, log *slog.Logger) (*DeadLetters, error) {
	maxBytes, err := MaxRecordBytesOf(job)
	if err != nil {
		return nil, err
	}
	d := &DeadLetters{operator: operator, task: task, topic: job.Params[control.ParamDeadLetterTopic], maxBytes: maxBytes, log: log}
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.topic != "" {
		if len(job.KafkaBrokers) == 0 {
			return nil, fmt.Errorf("job param %s %q: the job lists no Kafka brokers to write it to", control.ParamDeadLetterTopic, d.topic)
		}
		d.opts = append([]kgo.Opt{
			kgo.SeedBrokers(job.KafkaBrokers...),
			kgo.DefaultProduceTopic(d.topic),
			kgo.AllowAutoTopicCreation(),
			kgo.ProducerBatchMaxBytes(int32(min(maxBytes+(64<<10), math.MaxInt32))),
		}, extra...)
	}
	return d, nil
}

// NewTestDeadLetters returns a dead-letter path that only counts and logs,
// for operators run outside a worker (unit tests, benchmarks).
func NewTestDeadLetters(operator string) *DeadLetters {
	return &DeadLetters{operator: operator, task: operator + "-test", maxBytes: DefaultMaxRecordBytes, log: slog.Default()}
}

// Topic is the dead-letter topic ("" when rejected records are skipped).
func (d *DeadLetters) Topic() string { return d.topic }

// MaxRecordBytes is the job's record size limit (key plus value).
func (d *DeadLetters) MaxRecordBytes() int { return d.maxBytes }

// TooLarge reports whether r exceeds the job's record size limit.
func (d *DeadLetters) TooLarge(r wire.Record) bool { return len(r.Key)+len(r.Value) > d.maxBytes }

// Reject counts r as rejected for reason (ReasonMalformed, ReasonOversize
// or an operator's own word, counted as malformed) and queues it for the
// dead-letter topic. cause explains the rejection and may be nil. The
// operator then skips the record.
func (d *DeadLetters) Reject(r wire.Record, reason string, cause error) {
	if d == nil { // an operator built outside a worker without NewTestDeadLetters
		slog.Default().Warn("rejected input record (no dead-letter path)", "reason", reason, "partition", r.Partition, "offset", r.Offset, "err", cause)
		return
	}
	if reason == "" {
		reason = ReasonMalformed
	}
	var total uint64
	if reason == ReasonOversize {
		total = d.oversize.Add(1) + d.malformed.Load()
	} else {
		total = d.malformed.Add(1) + d.oversize.Load()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if now := time.Now(); now.Sub(d.told) >= deadLetterLogEvery {
		what := "skipped (no " + control.ParamDeadLetterTopic + ")"
		if d.topic != "" {
			what = "sent to dead-letter topic " + d.topic
		}
		d.log.Warn("rejected input records "+what, "operator", d.operator, "task", d.task, "reason", reason,
			"partition", r.Partition, "offset", r.Offset, "bytes", len(r.Key)+len(r.Value), "err", cause,
			"since_last_log", total-d.toldTotal, "total", total)
		d.told, d.toldTotal = now, total
	}
	if d.topic == "" {
		return
	}
	msg := ""
	if cause != nil {
		msg = cause.Error()
		msg = msg[:min(len(msg), 1024)] // headers must fit the batch limit's slack
	}
	key, value := r.Key, r.Value
	var cut []kgo.RecordHeader
	if size := len(key) + len(value); size > d.maxBytes {
		key = key[:min(len(key), d.maxBytes)]
		value = value[:min(len(value), d.maxBytes-len(key))]
		cut = append(cut, kgo.RecordHeader{Key: HeaderOriginalBytes, Value: strconv.AppendInt(nil, int64(size), 10)})
	}
	rec := &kgo.Record{
		Key: slices.Clone(key), Value: slices.Clone(value),
		Headers: []kgo.RecordHeader{
			{Key: HeaderOperator, Value: []byte(d.operator)},
			{Key: HeaderTask, Value: []byte(d.task)},
			{Key: HeaderReason, Value: []byte(reason)},
			{Key: HeaderError, Value: []byte(msg)},
			{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
			{Key: HeaderOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		},
	}
	rec.Headers = append(rec.Headers, cut...)
	if r.EventTime > 0 {
		rec.Timestamp = time.Unix(0, r.EventTime)
	}
	d.pending = append(d.pending, rec)
}

// Flush writes the records rejected since the last flush and waits for
// their acknowledgement. Write failures are counted and logged, not
// returned: bad input must not fail the task.
func (d *DeadLetters) Flush(ctx context.Context) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return
	}
	recs := d.pending
	d.pending = nil
	if d.client == nil && !d.closed {
		cl, err := kgo.NewClient(d.opts...)
		if err != nil {
			d.failed.Add(uint64(len(recs)))
			d.log.Error("dead-letter topic client", "task", d.task, "topic", d.topic, "lost", len(recs), "err", err)
			return
		}
		d.client = cl
	}
	if d.client == nil {
		d.failed.Add(uint64(len(recs)))
		d.log.Error("dead-letter records after the task closed", "task", d.task, "topic", d.topic, "lost", len(recs))
		return
	}
	var firstErr error
	ctx, cancel := context.WithTimeout(ctx, DeliveryTimeout)
	defer cancel()
	for _, res := range d.client.ProduceSync(ctx, recs...) {
		if res.Err != nil {
			d.failed.Add(1)
			if firstErr == nil {
				firstErr = res.Err
			}
			continue
		}
		d.written.Add(1)
	}
	if firstErr != nil {
		d.log.Error("writing to the dead-letter topic failed", "task", d.task, "topic", d.topic,
			"failed_total", d.failed.Load(), "err", firstErr)
	}
}

// AddWritten counts n records as acknowledged by the dead-letter topic, as
// Flush does; the runtime's metric tests use it to drive the counts without
// a topic.
func (d *DeadLetters) AddWritten(n uint64) { d.written.Add(n) }

// Counts returns what the task rejected so far.
func (d *DeadLetters) Counts() DeadLetterCounts {
	if d == nil {
		return DeadLetterCounts{}
	}
	return DeadLetterCounts{Malformed: d.malformed.Load(), Oversize: d.oversize.Load(), Written: d.written.Load(), Failed: d.failed.Load()}
}

// Counters renders the counts as operator counters (task metrics).
func (c DeadLetterCounts) Counters() map[string]uint64 {
	return map[string]uint64{
		"deadletter_malformed": c.Malformed, "deadletter_oversize": c.Oversize,
		"deadletter_written": c.Written, "deadletter_failed": c.Failed,
	}
}

// IsZero reports whether nothing was rejected.
func (c DeadLetterCounts) IsZero() bool { return c == DeadLetterCounts{} }

// Close writes what is pending (bounded by a short timeout) and closes the
// client. Records that could not be written were counted and logged.
func (d *DeadLetters) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d.Flush(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.client != nil {
		d.client.Close()
		d.client = nil
	}
}
