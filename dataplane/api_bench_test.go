package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
)

// Benchmarks of the operator families on the real task loop: one task of
// the operator under test on a worker without network, fed frames of 500
// records straight into handleFrame, its output sent in memory to a
// running count-sink task. They report events/s of one task.

const opBenchBatch = 500

type opBenchPipe struct {
	op   *task
	sink *task
}

func newOpBenchPipe(b *testing.B, q *QueryBuilder, opName, backend string) *opBenchPipe {
	b.Helper()
	ops, err := q.Build()
	if err != nil {
		b.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: b.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	job := control.JobSpec{JobID: "bench-" + q.Name(), Operators: ops, NumBuckets: 128, BatchSize: opBenchBatch, StateBackend: backend}
	dep := control.Deployment{Job: job, Epoch: 1}
	for _, op := range ops {
		dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, 0), Operator: op.Name, WorkerID: "w1"})
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: make([]int, 128)})
	}
	p := &opBenchPipe{}
	for _, name := range []string{opName, "sink"} {
		ref := dep.TasksOf(name)[0]
		t, err := w.createTask(dep, ref, nil)
		if err != nil {
			b.Fatal(err)
		}
		w.tasks[t.key()] = t
		if name == "sink" {
			p.sink = t
		} else {
			p.op = t
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.sink.start(ctx)
	b.Cleanup(func() {
		cancel()
		_ = p.op.stop(context.Background())
		_ = p.sink.stop(context.Background())
	})
	return p
}

// run feeds n records made by mk (from upstream task from(i)), with a
// watermark every watermarkEvery batches when > 0.
func (p *opBenchPipe) run(b *testing.B, mk func(i int) Record, from func(i int) string, watermarkEvery int) {
	b.Helper()
	ctx := context.Background()
	batch := make([]Record, 0, opBenchBatch)
	var maxTs int64
	start, cpu0 := time.Now(), processCPU()
	sent := 0
	for i := 0; i < b.N; i++ {
		r := mk(i)
		maxTs = max(maxTs, r.EventTime)
		batch = append(batch, r)
		if len(batch) == opBenchBatch || i == b.N-1 {
			f := &wire.Frame{Kind: wire.FrameData, JobID: p.op.jobID, FromTask: from(i), ToTask: p.op.id, Records: batch}
			if err := p.op.handleSettled(ctx, f); err != nil {
				b.Fatal(err)
			}
			sent++
			batch = make([]Record, 0, opBenchBatch)
			if watermarkEvery > 0 && sent%watermarkEvery == 0 {
				for _, up := range p.op.view.Load().upstreams {
					if err := p.op.handleSettled(ctx, wmFrame(up, maxTs-int64(200*time.Millisecond), false)); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	// CPU per event (all goroutines: operator, sink, GC) is steadier than
	// events/s on a shared machine.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/event")
	if err := p.sink.err(); err != nil {
		b.Fatal(err)
	}
}

var opBenchKeys = func() [][]byte {
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = []byte(produce.KeyName(i))
	}
	return keys
}()

// opBenchKey spreads records over 10 000 keys (input generation stays out
// of the measured cost).
func opBenchKey(i int) []byte { return opBenchKeys[uint32(i*2654435761)%10000] }

func opBenchRecord(i int) Record {
	return Record{Key: opBenchKey(i), Value: binary.LittleEndian.AppendUint64(make([]byte, 0, 16), uint64(i)), EventTime: int64(i) * int64(time.Millisecond), Offset: int64(i)}
}

func opBenchFromSource(int) string { return "source-0" }

var opBenchKeys100k = func() [][]byte {
	keys := make([][]byte, 100_000)
	for i := range keys {
		keys[i] = []byte(produce.KeyName(i))
	}
	return keys
}()

// opBenchRecord100k is opBenchRecord over 100 000 keys.
func opBenchRecord100k(i int) Record {
	r := opBenchRecord(i)
	r.Key = opBenchKeys100k[uint32(i*2654435761)%100_000]
	return r
}

// processCPU is the user+system CPU time of the process, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// opBenchEvent is the input of the windowed families: 1 000 keys, 100 µs
// of event time per record (10 000 events/s of event time, so each key
// has about 10 records per second of event time).
func opBenchEvent(i int) Record {
	return Record{Key: opBenchKeys[uint32(i*2654435761)%1000], Value: opBenchKeys[i%10000][:8], EventTime: int64(i) * int64(100*time.Microsecond), Offset: int64(i)}
}

// BenchmarkStateless: a map and the exchange to the sink.
func BenchmarkStateless(b *testing.B) {
	q := NewQuery("bench-stateless")
	q.Source("source", 1).Map("map", func(r Record) Record { r.Value = r.Value[:4]; return r }).Sink("sink")
	p := newOpBenchPipe(b, q, "map", "memory")
	b.ResetTimer()
	p.run(b, opBenchRecord, opBenchFromSource, 0)
}

// BenchmarkKeyedStateful: a keyed counter over 10 000 keys (multi-get,
// user function, multi-put per batch); pebble-100k-keys spreads records
// uniformly over 100 000 keys, the key space of one of the two counter
// tasks of the steady-state bench (experiments/bench/counter-steady.json).
func BenchmarkKeyedStateful(b *testing.B) {
	for _, c := range []struct {
		name, backend string
		mk            func(int) Record
	}{
		{"memory", "memory", opBenchRecord},
		{"pebble", "pebble", opBenchRecord},
		{"pebble-100k-keys", "pebble", opBenchRecord100k},
	} {
		backend := c.backend
		b.Run(c.name, func(b *testing.B) {
			q := NewQuery("bench-keyed-" + backend)
			q.Source("source", 1).KeyedStateful("count", []string{"count"}, countPerKey).Sink("sink")
			p := newOpBenchPipe(b, q, "count", backend)
			b.ResetTimer()
			p.run(b, c.mk, opBenchFromSource, 0)
		})
	}
}

// BenchmarkWindow: tumbling and sliding per-key counts over 1 000 keys
// (opBenchEvent), a watermark every 10 batches (0.5 s of event time).
func BenchmarkWindow(b *testing.B) {
	for _, c := range []struct {
		name string
		spec WindowSpec
	}{
		{"tumbling-1s", Tumbling(time.Second)},
		{"sliding-10s-2s", Sliding(10*time.Second, 2*time.Second)},
	} {
		for _, backend := range []string{"memory", "pebble"} {
			b.Run(c.name+"/"+backend, func(b *testing.B) {
				q := NewQuery(fmt.Sprintf("bench-window-%s-%s", c.name, backend))
				q.Source("source", 1).Window("window", c.spec, func() Aggregator { return CountAggregator{} }).Sink("sink")
				p := newOpBenchPipe(b, q, "window", backend)
				b.ResetTimer()
				p.run(b, opBenchEvent, opBenchFromSource, 10)
			})
		}
	}
}

// BenchmarkJoin: a windowed (1 s) join of two inputs over 1 000 keys
// (opBenchEvent; about 5 records per key, input and window, so each record
// joins with about 5 of the other input).
func BenchmarkJoin(b *testing.B) {
	for _, backend := range []string{"memory", "pebble"} {
		b.Run("window-1s/"+backend, func(b *testing.B) {
			q := NewQuery("bench-join-" + backend)
			src := q.Source("source", 1)
			left := src.Filter("left", func(Record) bool { return true })
			right := src.Filter("right", func(Record) bool { return true })
			left.Join("join", right, JoinSpec{Window: time.Second, Join: func(key []byte, l, r Record) (Record, bool) {
				return Record{Key: key, Value: r.Value}, true
			}}).Sink("sink")
			p := newOpBenchPipe(b, q, "join", backend)
			b.ResetTimer()
			p.run(b, opBenchEvent, func(i int) string {
				if (i/opBenchBatch)%2 == 0 {
					return "left-0"
				}
				return "right-0"
			}, 10)
		})
	}
}
