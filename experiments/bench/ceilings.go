package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/exchange"
	"koala/dataplane/wire"
	"koala/experiments"
	"koala/statesvc"
)

// Component ceilings: each building block of the pipeline alone, in the same
// run as the steady-state figures, so that a pipeline's events/s can be read
// as a fraction of its slowest part. Records have the shape the benchmarks
// and the producer use: a 16-byte key and a CeilingValueBytes value.

// Ceiling components.
const (
	CeilKafkaProduce = "kafka-produce"
	CeilKafkaConsume = "kafka-consume"
	CeilCodec        = "frame-codec"
	CeilPebble       = "pebble-getput"
	CeilExchange     = "grpc-exchange"
)

// CeilingValueBytes is the value size of the records of every ceiling.
const CeilingValueBytes = 80

// Ceiling is one component's events/s alone.
type Ceiling struct {
	Component    string  `json:"component"`
	EventsPerSec float64 `json:"events_per_sec"`
	Events       int64   `json:"events"`
	Seconds      float64 `json:"seconds"`
	What         string  `json:"what"`
	Error        string  `json:"error,omitempty"`
}

// PipelineComponents are the components each steady-state query's records
// pass through (every record crosses Kafka twice, is framed and decoded at
// least once, and the keyed counter reads and writes Pebble per batch).
var PipelineComponents = map[string][]string{
	"hello":                   {CeilKafkaProduce, CeilKafkaConsume, CeilCodec, CeilExchange},
	"counter":                 {CeilKafkaProduce, CeilKafkaConsume, CeilCodec, CeilExchange, CeilPebble},
	"nexmark-q5":              {CeilKafkaProduce, CeilKafkaConsume, CeilCodec, CeilExchange},
	"nexmark-q1":              {CeilKafkaProduce, CeilKafkaConsume, CeilCodec, CeilExchange},
	"nexmark_query6_modified": {CeilKafkaProduce, CeilKafkaConsume, CeilCodec, CeilExchange, CeilPebble},
}

// CeilingFraction is a pipeline's sink events/s as a fraction of the slowest
// of its measured components.
type CeilingFraction struct {
	Query        string   `json:"query"`
	EventsPerSec float64  `json:"events_per_sec"`
	Slowest      string   `json:"slowest_component"`
	SlowestRate  float64  `json:"slowest_events_per_sec"`
	Fraction     float64  `json:"fraction"`
	Missing      []string `json:"missing_components,omitempty"` // not measured: the fraction is an upper bound
}

// CeilingFractions relates each successful steady run to the ceilings.
// Components that failed or were not measured are listed as missing.
func CeilingFractions(steady []Steady, ceilings []Ceiling) []CeilingFraction {
	rate := map[string]float64{}
	for _, c := range ceilings {
		if c.Error == "" && c.EventsPerSec > 0 {
			rate[c.Component] = c.EventsPerSec
		}
	}
	var out []CeilingFraction
	for _, s := range steady {
		comps, ok := PipelineComponents[s.Query]
		if !ok || s.Status != experiments.StatusOK || s.EventsPerSec <= 0 {
			continue
		}
		f := CeilingFraction{Query: s.label(), EventsPerSec: s.EventsPerSec, SlowestRate: math.Inf(1)}
		for _, c := range comps {
			r, ok := rate[c]
			if !ok {
				f.Missing = append(f.Missing, c)
				continue
			}
			if r < f.SlowestRate {
				f.Slowest, f.SlowestRate = c, r
			}
		}
		if f.Slowest == "" {
			f.SlowestRate = 0
		} else {
			f.Fraction = s.EventsPerSec / f.SlowestRate
		}
		out = append(out, f)
	}
	return out
}

func ceilingRecords(n int) []wire.Record {
	recs := make([]wire.Record, n)
	val := make([]byte, CeilingValueBytes)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	for i := range recs {
		recs[i] = wire.Record{Key: fmt.Appendf(nil, "key-%012d", i), Value: val, EventTime: time.Now().UnixNano(), Partition: int32(i % 4), Offset: int64(i)}
	}
	return recs
}

// MeasureCodec encodes and decodes 1000-record data frames for d.
func MeasureCodec(d time.Duration) Ceiling {
	c := Ceiling{Component: CeilCodec, What: "wire.AppendFrame + DecodeFrame of 1000-record data frames, one goroutine"}
	f := &wire.Frame{Kind: wire.FrameData, JobID: "bench", FromTask: "source-0", ToTask: "sink-0", Records: ceilingRecords(1000)}
	var buf []byte
	start := time.Now()
	for time.Since(start) < d {
		buf = wire.AppendFrame(buf[:0], f)
		if _, err := wire.DecodeFrame(buf); err != nil {
			c.Error = "decode: " + err.Error()
			return c
		}
		c.Events += int64(len(f.Records))
	}
	c.Seconds = time.Since(start).Seconds()
	c.EventsPerSec = float64(c.Events) / c.Seconds
	return c
}

// MeasureExchange sends 1000-record data frames from one exchange peer
// stream to another worker's exchange server over loopback gRPC for d and
// counts the records the far side received within d. It then waits (up to
// a minute) for the frames still in flight and reports an error unless
// every record sent arrived exactly once in number.
func MeasureExchange(d time.Duration) Ceiling {
	c := Ceiling{Component: CeilExchange, What: "dataplane exchange: one peer stream → exchange server over loopback gRPC (koala-frame codec), 1000-record data frames, records counted at the receiver"}
	l, err := exchange.StartLoopback(nil)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer l.Close()
	f := &wire.Frame{Kind: wire.FrameData, JobID: "bench", FromTask: "source-0", ToTask: "sink-0", Records: ceilingRecords(1000)}
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	var sent uint64
	start := time.Now()
	for time.Since(start) < d {
		if err := l.Send(ctx, f); err != nil {
			c.Error = "send: " + err.Error()
			return c
		}
		sent += uint64(len(f.Records))
	}
	_, got := l.Received()
	c.Seconds = time.Since(start).Seconds()
	c.Events = int64(got)
	c.EventsPerSec = float64(c.Events) / c.Seconds
	for got < sent && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		_, got = l.Received()
	}
	if got != sent {
		c.Error = fmt.Sprintf("sent %d records, the receiver got %d", sent, got)
	}
	return c
}

// MeasurePebble runs multi-get + multi-put of 1000-key batches over keys
// distinct keys in a fresh Pebble store under a temporary directory for d
// (the counter's access pattern: read the counts of a batch, write them back).
func MeasurePebble(d time.Duration, keys int) Ceiling {
	c := Ceiling{Component: CeilPebble, What: fmt.Sprintf("statesvc Pebble MultiGet + MultiPut of 1000-key batches over %d keys, 8-byte values, temp dir", keys)}
	dir, err := os.MkdirTemp("", "koala-bench-pebble-")
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer os.RemoveAll(dir)
	p, err := statesvc.OpenPebble(statesvc.Options{Dir: dir})
	if err != nil {
		c.Error = "open pebble: " + err.Error()
		return c
	}
	defer p.Close()
	const batch = 1000
	ks := make([][]byte, batch)
	kvs := make([]statesvc.KV, batch)
	next := 0
	start := time.Now()
	for time.Since(start) < d {
		for i := range ks {
			// A multiplicative hash spreads each batch over the key space.
			ks[i] = fmt.Appendf(ks[i][:0], "key-%012d", (uint64(next+i)*2654435761)%uint64(keys))
		}
		next += batch
		vals, err := p.MultiGet(ks)
		if err != nil {
			c.Error = "multi-get: " + err.Error()
			return c
		}
		for i, k := range ks {
			v := make([]byte, 8)
			if len(vals[i]) == 8 {
				copy(v, vals[i])
			}
			v[0]++
			kvs[i] = statesvc.KV{Key: k, Value: v}
		}
		if err := p.MultiPut(kvs); err != nil {
			c.Error = "multi-put: " + err.Error()
			return c
		}
		c.Events += batch
	}
	c.Seconds = time.Since(start).Seconds()
	c.EventsPerSec = float64(c.Events) / c.Seconds
	return c
}

// MeasureKafka creates topic (partitions partitions) on brokers, produces n
// records with one franz-go client, consumes them all with another, and
// deletes the topic. It returns the produce and the consume ceiling.
func MeasureKafka(ctx context.Context, brokers []string, topic string, partitions, n int) (Ceiling, Ceiling) {
	prod := Ceiling{Component: CeilKafkaProduce, What: fmt.Sprintf("franz-go async produce of %d records (16 B key, %d B value) to a %d-partition topic, acks=all, until flushed", n, CeilingValueBytes, partitions)}
	cons := Ceiling{Component: CeilKafkaConsume, What: fmt.Sprintf("franz-go consume of the same %d records from the start of the topic", n)}
	fail := func(err error) (Ceiling, Ceiling) {
		prod.Error, cons.Error = err.Error(), err.Error()
		return prod, cons
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return fail(fmt.Errorf("kafka client: %w", err))
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, int32(partitions), 1, nil, topic); err != nil {
		return fail(fmt.Errorf("create topic %s: %w", topic, err))
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = adm.DeleteTopics(dctx, topic)
		cancel()
	}()

	val := make([]byte, CeilingValueBytes)
	var failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%012d", i), Value: val}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fail(fmt.Errorf("flush: %w", err))
	}
	prod.Seconds = time.Since(start).Seconds()
	if f := failed.Load(); f > 0 {
		prod.Error = fmt.Sprintf("%d of %d records failed, first: %v", f, n, firstErr.Load())
	}
	prod.Events = int64(n) - failed.Load()
	prod.EventsPerSec = float64(prod.Events) / prod.Seconds

	cc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		cons.Error = "consumer: " + err.Error()
		return prod, cons
	}
	defer cc.Close()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start = time.Now()
	for cons.Events < prod.Events && cctx.Err() == nil {
		fs := cc.PollFetches(cctx)
		if errs := fs.Errors(); len(errs) > 0 && cctx.Err() == nil {
			cons.Error = fmt.Sprintf("fetch %s/%d: %v", errs[0].Topic, errs[0].Partition, errs[0].Err)
			return prod, cons
		}
		cons.Events += int64(fs.NumRecords())
	}
	cons.Seconds = time.Since(start).Seconds()
	if cons.Events < prod.Events {
		cons.Error = fmt.Sprintf("consumed %d of %d records before giving up", cons.Events, prod.Events)
	}
	cons.EventsPerSec = float64(cons.Events) / cons.Seconds
	return prod, cons
}
