package workflows_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/workflows/wftest"
)

var registerKafkaCounter sync.Once

// TestRecoverKafkaTxnSinkExactlyOnce: a keyed counter writing to Kafka
// with checkpoints; a worker with counter tasks is lost after a
// checkpoint completed and more records were written, and the job is
// recovered from it. A read_committed consumer of the output then sees,
// for every key, each running count 1..n exactly once (n the key's
// records in the input): the output of the records after the checkpoint,
// written by the lost incarnation, was aborted, and the replay's was
// committed.
func TestRecoverKafkaTxnSinkExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	registerKafkaCounter.Do(func() {
		must(t, wftest.RegisterKafkaCounter())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic = "counts"
	j := startCheckpointedQuery(t, ctx, "ckpt-kafka-txn", wftest.KafkaCounterQuery, ckptNumKeys, map[string]string{control.ParamKafkaSinkTopic: topic})
	waitForSink(t, ctx, j.acts, j.dep, 3000)
	cp := j.checkpoint(t, 1)
	covered := visibleCounts(t, ctx, j.c.Brokers, topic, kgo.ReadCommitted())
	_, n := oracleUpTo(t, ctx, j, cp.Offsets)
	if total := sumLens(covered); total != int(n) {
		t.Fatalf("after checkpoint %s: read_committed sees %d records, want the %d it covers", cp.CheckpointID, total, n)
	}
	st := sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+3000) // written after the cut, not committed

	victim := victimWorker(t, j.dep, j.prod.WorkerID)
	rec := j.recover(t, victim)
	if rec.CheckpointID != cp.CheckpointID {
		t.Fatalf("recovered from %s, want %s", rec.CheckpointID, cp.CheckpointID)
	}
	st = sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+3000)
	rep := stopAndCheckLedger(t, ctx, j.acts, j.job, j.dep, j.prod)

	oracle := map[string]uint64{}
	for i := int64(0); i < rep.Acked; i++ {
		oracle[produce.KeyName(produce.UniformKeyIndex(ckptSeed, j.numKeys, i))]++
	}
	got := visibleCounts(t, ctx, j.c.Brokers, topic, kgo.ReadCommitted())
	var wrong []string
	for k, want := range oracle {
		counts := got[k]
		slices.Sort(counts)
		ok := uint64(len(counts)) == want
		for i := 0; ok && i < len(counts); i++ {
			ok = counts[i] == uint64(i+1)
		}
		if !ok {
			wrong = append(wrong, fmt.Sprintf("%s: %d outputs (want 1..%d once each)", k, len(counts), want))
		}
	}
	for k := range got {
		if oracle[k] == 0 {
			wrong = append(wrong, k+": not in the input")
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Fatalf("read_committed output differs for %d keys, e.g. %v", len(wrong), wrong[:min(5, len(wrong))])
	}
	all := visibleCounts(t, ctx, j.c.Brokers, topic, kgo.ReadUncommitted())
	aborted := sumLens(all) - sumLens(got)
	if aborted <= 0 {
		t.Fatalf("the topic holds no aborted record: the lost incarnation's output after the checkpoint was never written, so the test shows nothing")
	}
	t.Logf("%d records, %d keys exactly once for read_committed; %d aborted records of the lost incarnation hidden", rep.Acked, len(oracle), aborted)
}

func sumLens(m map[string][]uint64) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// visibleCounts reads topic at the isolation level up to its last stable
// (read_committed) or high watermark (read_uncommitted) offsets and
// returns the counts written per key.
func visibleCounts(t *testing.T, ctx context.Context, brokers []string, topic string, level kgo.IsolationLevel) map[string][]uint64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.KeepControlRecords())
	must(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var ends kadm.ListedOffsets
	if level == kgo.ReadCommitted() {
		ends, err = adm.ListCommittedOffsets(ctx, topic)
	} else {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	must(t, err)
	end := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	out := map[string][]uint64{}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %s: %v (at %v of %v)", topic, rctx.Err(), next, end)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() || r.Offset >= end[r.Partition] {
				return
			}
			if len(r.Value) != 8 {
				t.Errorf("output %s@%d: value of %d bytes, want 8", r.Key, r.Offset, len(r.Value))
				return
			}
			out[string(r.Key)] = append(out[string(r.Key)], binary.LittleEndian.Uint64(r.Value))
		})
	}
	return out
}
