package dataplane

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// Batch latency while state migrates: a keyed counter task (count-0, Pebble
// state) owns every bucket after a scale-in; its old neighbour count-1,
// on the same worker, still holds migBenchMoved keys of the buckets it
// gave away (values of migBenchValue bytes), and count-0's lookup table
// lists them all. Count-0 processes batches of migBenchBatch records of
// its own migBenchLocal keys (uniform), so every batch does the same work
// and any difference is what migration costs it. Each op is one batch, as
// the task goroutine runs it (handleFrame: the batch, its output, and the
// after-batch step, where migration used to run); the metrics are the
// batch times' p50, p99 and max. "idle" runs the batches with eventual
// migration off (the table stays full); "migrating" with it on, at the
// job's defaults, and counts only the batches that ran while keys were
// still moving.
//
// Run with a fixed count, e.g. -benchtime=400x: each run builds its own
// pair of tasks, since the migration a run measures must not have been
// used up by the framework's calibration runs.
const (
	migBenchMoved   = 100_000
	migBenchLocal   = 100_000
	migBenchValue   = 100
	migBenchBatch   = 1000
	migBenchBuckets = 128
)

type migBenchPipe struct {
	newOwner, oldOwner, sink *task
	local                    [][]byte
	rng                      *rand.Rand
}

func newMigBenchPipe(b *testing.B, rate string) *migBenchPipe {
	return newMigBenchPipeOf(b, rate, migBenchBuckets, migBenchMoved, migBenchLocal)
}

// newMigBenchPipeOf builds the pair with numBuckets buckets, the odd ones
// moved, holding moved keys on the old owner and local on the new one.
func newMigBenchPipeOf(b *testing.B, rate string, numBuckets, movedKeys, localKeys int) *migBenchPipe {
	b.Helper()
	q := NewQuery("bench-mig-latency")
	q.Source("source", 1).KeyedStateful("count", []string{"count"}, countPerKey).Parallelism(2).Sink("sink")
	ops, err := q.Build()
	if err != nil {
		b.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: b.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	job := control.JobSpec{JobID: "bench-mig-latency", Operators: ops, NumBuckets: numBuckets, BatchSize: migBenchBatch, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand}}
	if rate != "" {
		job.Params[migBenchRateParam] = rate
	}
	dep := control.Deployment{Job: job, Epoch: 2}
	for _, op := range ops {
		for i := range op.Parallelism {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 2, Buckets: make([]int, numBuckets)})
	}
	p := &migBenchPipe{rng: rand.New(rand.NewPCG(3, 5))}
	for id, t := range createTasks(b, w, dep) {
		switch id {
		case "count-0":
			p.newOwner = t
		case "count-1":
			p.oldOwner = t
		default:
			p.sink = t
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.sink.start(ctx)
	b.Cleanup(func() {
		cancel()
		_ = p.newOwner.stop(context.Background())
		_ = p.oldOwner.stop(context.Background())
		_ = p.sink.stop(context.Background())
	})
	var kvNew, kvOld []statesvc.KV
	flush := func(t *task, kvs []statesvc.KV, final bool) []statesvc.KV {
		if len(kvs) < 8192 && !final {
			return kvs
		}
		if err := t.keyed.store.MultiPut(kvs); err != nil {
			b.Fatal(err)
		}
		return kvs[:0]
	}
	filler := make([]byte, migBenchValue)
	var movedBuckets []int
	for bk := range numBuckets {
		if bk%2 == 1 {
			movedBuckets = append(movedBuckets, bk)
		}
	}
	moved := 0
	for i := 0; moved < movedKeys || len(p.local) < localKeys; i++ {
		key := []byte(produce.KeyName(i))
		if statesvc.BucketOf(key, numBuckets)%2 == 1 {
			if moved < movedKeys {
				moved++
				kvOld = flush(p.oldOwner, append(kvOld, statesvc.KV{Key: p.oldOwner.keyed.stateKey("count", key), Value: filler}), false)
			}
			continue
		}
		if len(p.local) < localKeys {
			p.local = append(p.local, key)
			kvNew = flush(p.newOwner, append(kvNew, statesvc.KV{Key: p.newOwner.keyed.stateKey("count", key), Value: binary.LittleEndian.AppendUint64(nil, 1)}), false)
		}
	}
	flush(p.oldOwner, kvOld, true)
	flush(p.newOwner, kvNew, true)
	me := dep.TasksOf("count")[1]
	entries, err := p.oldOwner.keyed.localEntries(movedBuckets, me, handoffKeys{})
	if err != nil {
		b.Fatal(err)
	}
	for start := 0; start < len(entries); start += kltChunk {
		chunk := entries[start:min(start+kltChunk, len(entries))]
		f := &wire.Frame{Kind: wire.FrameKLT, JobID: job.JobID, FromTask: me.ID, ToTask: "count-0", BarrierID: "reconfig-1", Records: chunk}
		if err := p.newOwner.handleSettled(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
	if n := p.newOwner.keyed.klt.Len(); n != movedKeys {
		b.Fatalf("table holds %d entries after the handoff, want %d", n, movedKeys)
	}
	return p
}

// batch runs one batch on the new owner and returns how long the task
// goroutine spent on it.
func (p *migBenchPipe) batch(b *testing.B, ctx context.Context) time.Duration {
	recs := make([]Record, migBenchBatch)
	for i := range recs {
		recs[i] = Record{Key: p.local[p.rng.IntN(len(p.local))], Value: []byte{1}, Offset: int64(i)}
	}
	f := &wire.Frame{Kind: wire.FrameData, JobID: p.newOwner.jobID, FromTask: "source-0", ToTask: p.newOwner.id, Records: recs}
	start := time.Now()
	if err := p.newOwner.handleSettled(ctx, f); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// migBenchRateParam is control.ParamMigrationRate, spelled out so that
// the benchmark also builds against a runtime without it (which migrates
// on the task goroutine and ignores it), for before-and-after numbers.
const migBenchRateParam = "LazyByKeyMigrationBytesPerSecond"

func BenchmarkBatchLatencyDuringMigration(b *testing.B) {
	for _, c := range []struct {
		name      string
		migrating bool
		rate      string // "": the default
	}{
		{"idle", false, ""},
		{"migrating", true, ""}, // the default rate (8 MiB/s)
		{"migrating-32MiBps", true, "33554432"},
		{"migrating-2MiBps", true, "2097152"},
	} {
		migrating := c.migrating
		b.Run(c.name, func(b *testing.B) {
			p := newMigBenchPipe(b, c.rate)
			ctx := context.Background()
			ks := p.newOwner.keyed
			for range 20 { // warm the caches before the migration starts
				p.batch(b, ctx)
			}
			if migrating {
				ks.mode = control.ModeEventual // from the next after-batch step on
			}
			entries0, moved0 := ks.klt.Len(), ks.bytesMoved.Load()
			var times []time.Duration
			b.ResetTimer()
			for range b.N {
				busy := ks.klt.Len() > 0
				d := p.batch(b, ctx)
				if !migrating || busy {
					times = append(times, d)
				}
			}
			b.StopTimer()
			if b.N < 50 {
				return // the framework's first, single-batch run: too short to say anything
			}
			if len(times) == 0 {
				b.Fatal("no batch ran while keys were moving")
			}
			slices.Sort(times)
			pct := func(q float64) float64 {
				return float64(times[min(len(times)-1, int(q*float64(len(times))))].Microseconds())
			}
			b.ReportMetric(pct(0.5), "p50-us")
			b.ReportMetric(pct(0.99), "p99-us")
			b.ReportMetric(float64(times[len(times)-1].Microseconds()), "max-us")
			b.ReportMetric(float64(len(times)), "timed-batches")
			b.ReportMetric(float64(entries0-ks.klt.Len()), "keys-moved")
			b.ReportMetric(float64(ks.bytesMoved.Load()-moved0)/(1<<20), "MiB-moved")
			if migrating && ks.klt.Len() == entries0 {
				b.Fatal("no key moved while migrating")
			}
			if !migrating && ks.klt.Len() != entries0 {
				b.Fatalf("keys moved while idle: %d entries left of %d", ks.klt.Len(), entries0)
			}
		})
	}
}

// BenchmarkPullLargeBucket: a new owner pulls one bucket of 50 K keys
// (100-byte values, buffered in the old owner's write-back cache) in
// chunks of 1000 keys on its task goroutine (migrateChunk). Each op is one
// whole bucket, on a fresh pair; first-ms and last-ms are the mean time of
// the first and last five chunks: a pull that walks the bucket from its
// start over the keys already taken gets slower chunk by chunk, one that
// resumes where the previous chunk stopped does not.
func BenchmarkPullLargeBucket(b *testing.B) {
	const keys, chunk = 50_000, 1000
	var first, last, total time.Duration
	for range b.N {
		b.StopTimer()
		p := newMigBenchPipeOf(b, "", 2, keys, 0)
		ctx := context.Background()
		b.StartTimer()
		var times []time.Duration
		for p.newOwner.keyed.klt.Len() > 0 {
			start := time.Now()
			if err := p.newOwner.migrateChunk(ctx, chunk); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(start))
			if len(times) > 2*keys/chunk {
				b.Fatalf("%d chunks for %d keys", len(times), keys)
			}
		}
		b.StopTimer()
		if len(times) < 10 {
			b.Fatalf("%d chunks for %d keys of %d", len(times), keys, chunk)
		}
		for i := range 5 {
			first += times[i]
			last += times[len(times)-1-i]
		}
		for _, d := range times {
			total += d
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(first.Microseconds())/float64(5*b.N)/1e3, "first-ms")
	b.ReportMetric(float64(last.Microseconds())/float64(5*b.N)/1e3, "last-ms")
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1e3, "bucket-ms")
}
