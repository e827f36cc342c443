package workflows_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/statesvc"
	"koala/workflows/plan"
)

// BenchmarkCheckpointOverhead measures what aligned checkpoints every
// 10 s cost the keyed counter's throughput: the same preloaded input
// (KOALA_BENCH_CKPT_RECORDS records, default 40,000,000 over 20,000 keys:
// at about 2 M records/s in-process a run then spans two 10 s intervals)
// is processed as fast as the in-process cluster can, once without and
// once with checkpoints (KOALA_BENCH_CKPT_INTERVAL seconds, default 10),
// in alternating order over KOALA_BENCH_CKPT_PAIRS pairs (default 1).
// A checkpointed run that ends before its first checkpoint fails the
// benchmark. The preloaded input lives in the in-process Kafka (a few GB
// at the default).
// It reports both throughputs and the overhead in percent, the CPU time of
// the process per record (the cluster runs in it; on a shared machine
// this is the steadier measure of the work checkpoints add) and the mean
// checkpoint duration (injection to last ack: at saturation mostly the time
// the barrier waits behind the records queued before it), size, longest
// alignment and longest state write. Run it alone:
//
//	go test -run '^$' -bench CheckpointOverhead -benchtime 1x ./workflows
func BenchmarkCheckpointOverhead(b *testing.B) {
	records := envInt(b, "KOALA_BENCH_CKPT_RECORDS", 40_000_000)
	interval := time.Duration(envInt(b, "KOALA_BENCH_CKPT_INTERVAL", 10)) * time.Second
	pairs := envInt(b, "KOALA_BENCH_CKPT_PAIRS", 1)
	for b.Loop() {
		c := dptest.Start(b, dptest.Options{Workers: 3})
		acts := &activities.Activities{NC: c.NC, RequestTimeout: 30 * time.Second}
		var plain, ckpt, plainCPU, ckptCPU []float64
		var stats []activities.AwaitReply
		var bytes []uint64
		for i := range 2 * pairs {
			with := (i%2 == 1) != (i/2%2 == 1) // plain, ckpt, then ckpt, plain, …
			rate, cpu, cps, sizes := runThroughputJob(b, c, acts, fmt.Sprintf("bench-ckpt-%d", i), records, with, interval)
			if with && len(cps) == 0 {
				// Otherwise the "checkpointed" figures would measure a plain run.
				b.Fatalf("run %d ended before its first checkpoint (%d records at %.0f records/s, interval %s): raise KOALA_BENCH_CKPT_RECORDS or lower KOALA_BENCH_CKPT_INTERVAL", i, records, rate, interval)
			}
			if with {
				ckpt, ckptCPU = append(ckpt, rate), append(ckptCPU, cpu)
				stats = append(stats, cps...)
				bytes = append(bytes, sizes...)
			} else {
				plain, plainCPU = append(plain, rate), append(plainCPU, cpu)
			}
			b.Logf("run %d (checkpoints %v): %.0f records/s, %.2f CPU-µs/record, %d checkpoints", i, with, rate, cpu, len(cps))
		}
		p, k := mean(plain), mean(ckpt)
		b.ReportMetric(p, "rec/s-plain")
		b.ReportMetric(k, "rec/s-checkpointed")
		b.ReportMetric(100*(p-k)/p, "overhead-%")
		pc, kc := mean(plainCPU), mean(ckptCPU)
		b.ReportMetric(pc, "cpu-us/rec-plain")
		b.ReportMetric(kc, "cpu-us/rec-checkpointed")
		b.ReportMetric(100*(kc-pc)/pc, "cpu-overhead-%")
		if len(stats) > 0 {
			var dur, align, snap float64
			for _, s := range stats {
				dur += s.DurationMillis / float64(len(stats))
				for _, a := range s.Acks {
					align = max(align, a.AlignMillis)
					snap = max(snap, a.SnapshotMillis)
				}
			}
			var sz float64
			for _, n := range bytes {
				sz += float64(n) / float64(len(bytes))
			}
			b.ReportMetric(dur, "ms/checkpoint")
			b.ReportMetric(sz, "bytes/checkpoint")
			b.ReportMetric(align, "max-align-ms")
			b.ReportMetric(snap, "max-snapshot-ms")
			b.ReportMetric(float64(len(stats)), "checkpoints")
		}
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x / float64(len(xs))
	}
	return s
}

// runThroughputJob preloads records into a fresh topic, then runs the
// counter job over them and returns records per second from the start of
// the tasks to the last record at the sink; with checkpoints it takes one
// every interval and returns their acks and sizes.
func runThroughputJob(b *testing.B, c *dptest.Cluster, acts *activities.Activities, jobID string, records int, with bool, interval time.Duration) (float64, float64, []activities.AwaitReply, []uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	must(err)
	store := filepath.Join(b.TempDir(), "checkpoints")
	defer os.RemoveAll(store) // a run's checkpoints are not needed after it: keep the disk free
	job, err := acts.BuildJob(ctx, activities.JobInput{
		JobID: jobID, Query: "counter", Parallelism: map[string]int{"counter": 2},
		NumBuckets: 64, BatchSize: 1000, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: statesvc.BackendPebble,
		Params: map[string]string{control.ParamCheckpointStore: store},
	})
	must(err)
	must(acts.CreateTopic(ctx, job))
	prod := activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
		Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, RatePerSec: 1_000_000, NumKeys: 20000, Seed: 3, MaxEvents: int64(records),
	}}
	must(acts.StartProducer(ctx, prod))
	for {
		ends, err := acts.EndOffsets(ctx, job)
		must(err)
		var n int64
		for _, o := range ends {
			n += o
		}
		if n >= int64(records) {
			break
		}
		pollPause(b, ctx, 200*time.Millisecond)
	}
	rep, err := acts.StopProducer(ctx, prod)
	must(err)
	dep, err := plan.Initial(job, workers)
	must(err)
	must(acts.DeployTasks(ctx, activities.TasksInput{Deployment: dep}))
	defer func() { _ = acts.StopTasks(context.Background(), activities.TasksInput{Deployment: dep}) }()
	start, cpu0 := time.Now(), processCPU(b)
	must(acts.StartTasks(ctx, activities.TasksInput{Deployment: dep}))
	var cps []activities.AwaitReply
	var sizes []uint64
	next := start.Add(interval)
	for seq := 1; ; {
		counts, err := acts.CollectSinkCounts(ctx, dep)
		must(err)
		if counts.Distinct >= uint64(rep.Acked) {
			break
		}
		if with && time.Now().After(next) {
			id := checkpoint.ID(seq)
			cp := activities.CheckpointInput{Deployment: dep, CheckpointID: id, TimeoutSecs: 60}
			inj, err := acts.InjectCheckpoint(ctx, cp)
			must(err)
			aw, err := acts.AwaitCheckpoint(ctx, activities.AwaitCheckpointInput{CheckpointInput: cp, InjectedAt: inj.InjectedAt})
			must(err)
			m, err := acts.CompleteCheckpoint(ctx, activities.CompleteCheckpointInput{Deployment: dep, CheckpointID: id, Seq: seq, Offsets: inj.Offsets, Acks: aw.Acks, DurationMillis: aw.DurationMillis})
			must(err)
			cps, sizes = append(cps, aw), append(sizes, m.Bytes)
			seq++
			next = next.Add(interval)
		}
		pollPause(b, ctx, 20*time.Millisecond)
	}
	elapsed, cpu := time.Since(start), processCPU(b)-cpu0
	return float64(rep.Acked) / elapsed.Seconds(), float64(cpu.Microseconds()) / float64(rep.Acked), cps, sizes
}

// processCPU is the user and system CPU time of this process so far: the
// whole in-process cluster, so a measure of work that other processes on
// a shared machine do not inflate the way they inflate wall-clock time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pollPause waits d between two polls, failing when ctx (the deadline) ends.
func pollPause(b *testing.B, ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		b.Fatalf("deadline: %v", ctx.Err())
	case <-time.After(d):
	}
}
