package dataplane

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// The key lookup share: how much of a stateful batch's time goes to the
// key lookup table while a migration is under way (the design's claim is
// at most 3 %). A keyed counter on Pebble state has just been given half
// of the buckets of another counter task on the same worker; that task
// still holds their values, and this one's table lists every key of them.
// Each batch of kltShareBatch records then has
//
//   - kltShareFresh keys of moved buckets not fetched yet: the table
//     answers "remote" and the batch takes their values from the old owner
//     (in memory, as for an old owner on the same worker),
//   - kltShareTaken keys of moved buckets fetched by earlier batches: local
//     now, looked up in buckets whose entries are partly removed,
//   - the rest from the buckets the task always owned: local, in buckets
//     without entries.
//
// Both times are the runtime's own measurements: the key lookup time a
// task reports as KeyLookupUs (keyedState.lookupNanos: the table lookup
// and the split of the batch's keys into local and per-owner remote) and
// its batch time (taskStats.batchNanos: processKeyed and the output
// flush).
const (
	kltShareBatch   = 1000
	kltShareFresh   = 100
	kltShareTaken   = 150
	kltShareBuckets = 128
	kltShareKeys    = 600_000 // half of them in moved buckets
	kltShareWarmup  = 20      // batches before timing: the table's first flush, fetched keys to revisit
)

// kltShareMoved says whether bucket b is one of those handed over.
func kltShareMoved(b int) bool { return b%2 == 1 }

type kltSharePipe struct {
	newOwner, oldOwner, sink *task
	local, moved             [][]byte // keys of buckets kept and moved, in the order batches use them
	fresh, next              int      // next fresh moved key, next local key
	rng                      *rand.Rand
}

func newKLTSharePipe(b *testing.B) *kltSharePipe {
	b.Helper()
	q := NewQuery("bench-klt-share")
	q.Source("source", 1).KeyedStateful("count", []string{"count"}, countPerKey).Parallelism(2).Sink("sink")
	ops, err := q.Build()
	if err != nil {
		b.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: b.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	// Fetch on demand: no background migration drains the table between
	// batches, so what each batch looks up is what the batch design says.
	job := control.JobSpec{JobID: "bench-klt-share", Operators: ops, NumBuckets: kltShareBuckets, BatchSize: kltShareBatch, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand}}
	dep := control.Deployment{Job: job, Epoch: 2}
	for _, op := range ops {
		for i := range op.Parallelism {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		// The routing after the reconfiguration: count-0 owns every bucket.
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 2, Buckets: make([]int, kltShareBuckets)})
	}
	p := &kltSharePipe{rng: rand.New(rand.NewPCG(7, 11))}
	for id, t := range createTasks(b, w, dep) {
		switch id {
		case "count-0":
			p.newOwner = t
			// A timed batch includes its own fetch, as the lookup share
			// is of whole batches (no fetch pipeline).
			t.keyed.syncFetch = true
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

	// Each task's store holds the counts of its keys, written as batches
	// write them.
	var kvNew, kvOld []statesvc.KV
	put := func(t *task, kvs []statesvc.KV, final bool) []statesvc.KV {
		if len(kvs) < 8192 && !final {
			return kvs
		}
		if err := t.keyed.store.MultiPut(kvs); err != nil {
			b.Fatal(err)
		}
		return kvs[:0]
	}
	for i := range kltShareKeys {
		key := []byte(produce.KeyName(i))
		kv := statesvc.KV{Key: p.newOwner.keyed.stateKey("count", key), Value: binary.LittleEndian.AppendUint64(nil, uint64(i))}
		if kltShareMoved(statesvc.BucketOf(key, kltShareBuckets)) {
			p.moved = append(p.moved, key)
			kvOld = put(p.oldOwner, append(kvOld, kv), false)
		} else {
			p.local = append(p.local, key)
			kvNew = put(p.newOwner, append(kvNew, kv), false)
		}
	}
	put(p.oldOwner, kvOld, true)
	put(p.newOwner, kvNew, true)
	p.rng.Shuffle(len(p.moved), func(i, j int) { p.moved[i], p.moved[j] = p.moved[j], p.moved[i] })
	p.rng.Shuffle(len(p.local), func(i, j int) { p.local[i], p.local[j] = p.local[j], p.local[i] })

	// The handoff: the old owner lists the keys of the moved buckets, the
	// new owner installs them as a handoff's KLT frames would bring them.
	var movedBuckets []int
	for bk := range kltShareBuckets {
		if kltShareMoved(bk) {
			movedBuckets = append(movedBuckets, bk)
		}
	}
	me := dep.TasksOf("count")[1]
	entries, err := p.oldOwner.keyed.localEntries(movedBuckets, me, handoffKeys{})
	if err != nil {
		b.Fatal(err)
	}
	listed := 0 // one 4-byte hash per key (hashesRecord)
	for _, r := range entries {
		listed += len(r.Key) / 4
	}
	if listed != len(p.moved) {
		b.Fatalf("old owner lists %d keys of the moved buckets, holds %d", listed, len(p.moved))
	}
	for start := 0; start < len(entries); start += kltChunk {
		chunk := entries[start:min(start+kltChunk, len(entries))]
		f := &wire.Frame{Kind: wire.FrameKLT, JobID: job.JobID, FromTask: me.ID, ToTask: "count-0", BarrierID: "reconfig-1", Records: chunk}
		if err := p.newOwner.handleSettled(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
	if n := p.newOwner.keyed.klt.Len(); n != len(p.moved) {
		b.Fatalf("table holds %d entries after the handoff, want %d", n, len(p.moved))
	}
	for range kltShareWarmup {
		p.runBatch(b, ctx)
	}
	return p
}

// batch returns the next batch (see the file comment), in random order.
func (p *kltSharePipe) batch(b *testing.B) []Record {
	if p.fresh+kltShareFresh > len(p.moved) {
		b.Fatalf("all %d keys of the moved buckets fetched after %d batches: more batches need more keys (kltShareKeys)", len(p.moved), p.fresh/kltShareFresh)
	}
	keys := make([][]byte, 0, kltShareBatch)
	keys = append(keys, p.moved[p.fresh:p.fresh+kltShareFresh]...)
	if p.fresh >= kltShareTaken { // taken keys: a run of those fetched so far
		from := p.rng.IntN(p.fresh)
		for j := range kltShareTaken {
			keys = append(keys, p.moved[(from+j)%p.fresh])
		}
	}
	p.fresh += kltShareFresh
	for len(keys) < kltShareBatch {
		keys = append(keys, p.local[p.next])
		p.next = (p.next + 1) % len(p.local)
	}
	p.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	recs := make([]Record, len(keys))
	for i, k := range keys {
		recs[i] = Record{Key: k, Value: binary.LittleEndian.AppendUint64(make([]byte, 0, 8), uint64(i)), EventTime: int64(i) * int64(time.Millisecond), Offset: int64(i)}
	}
	return recs
}

func (p *kltSharePipe) runBatch(b *testing.B, ctx context.Context) {
	f := &wire.Frame{Kind: wire.FrameData, JobID: p.newOwner.jobID, FromTask: "source-0", ToTask: p.newOwner.id, Records: p.batch(b)}
	if err := p.newOwner.handleSettled(ctx, f); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStatefulBatchKLTShare reports the key lookup's share of a
// stateful batch during a migration (klt-pct-of-batch) and its time per
// batch (klt-ns/batch). One op is one batch of kltShareBatch records.
func BenchmarkStatefulBatchKLTShare(b *testing.B) {
	p := newKLTSharePipe(b)
	// One set-up for every b.N the framework tries: the handoff and the
	// Pebble stores take seconds to build. Each run goes on with the keys
	// not fetched yet.
	b.Run("pebble", func(b *testing.B) {
		ctx := context.Background()
		ks, st := p.newOwner.keyed, &p.newOwner.stats
		lookNs0, lookups0 := ks.lookupNanos.Load(), ks.lookupCount.Load()
		batchNs0, batches0 := st.batchNanos.Load(), st.batches.Load()
		fetched0, entries0 := ks.keysFetched.Load(), ks.klt.Len()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			p.runBatch(b, ctx)
		}
		b.StopTimer()
		lookNs, lookups := ks.lookupNanos.Load()-lookNs0, ks.lookupCount.Load()-lookups0
		batchNs, batches := st.batchNanos.Load()-batchNs0, st.batches.Load()-batches0
		fetched, entries := ks.keysFetched.Load()-fetched0, ks.klt.Len()
		if batches != uint64(b.N) || lookups != uint64(b.N) {
			b.Fatalf("%d batches timed and %d key lookups for %d batches run", batches, lookups, b.N)
		}
		// The table only shrinks here (fetch on demand: nothing is added,
		// no background migration), so entries left at the end means every
		// batch consulted a non-empty table; the fetches show it answered
		// "remote" for the fresh keys of every batch.
		if entries0 == 0 || entries == 0 {
			b.Fatalf("key lookup table empty during the timed batches (%d entries before, %d after): no migration measured", entries0, entries)
		}
		if want := uint64(b.N * kltShareFresh); fetched < want {
			b.Fatalf("%d keys fetched in %d batches, want at least %d: the table did not send the moved keys to their old owner", fetched, b.N, want)
		}
		b.ReportMetric(100*float64(lookNs)/float64(batchNs), "klt-pct-of-batch")
		b.ReportMetric(float64(lookNs)/float64(lookups), "klt-ns/batch")
		b.ReportMetric(float64(batchNs)/float64(batches), "batch-ns")
		b.ReportMetric(float64(entries), "klt-entries")
	})
}
