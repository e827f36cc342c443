package kafkaio

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RefreshEnds stamps each end offset with the time of its lookup; while the
// broker does not answer the lookups fail, the stamps keep their age (the
// source then holds its partitions non-idle, dataplane/idleness.go), and
// once it answers again they are fresh and show what was produced.
func TestRefreshEndsThroughOutage(t *testing.T) {
	const topic = "in"
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	outage := cutRequests(kc, kmsg.ListOffsets)
	setDown := outage.set

	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(p int32, n int) {
		for range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 3)
	produce(1, 5)

	r, err := NewReader(kc.ListenAddrs(), topic, []int32{0, 1}, nil, []kgo.Opt{kgo.RequestRetries(1), kgo.RetryTimeout(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ends := func() map[int32]PartitionPos {
		out := map[int32]PartitionPos{}
		for _, pp := range r.AppendPositions(nil) {
			out[pp.Partition] = pp
		}
		return out
	}
	if got := ends(); got[0].Known || !got[0].EndAt.IsZero() {
		t.Fatalf("before any lookup: %+v, want unknown", got[0])
	}
	before := time.Now()
	if err := r.RefreshEnds(ctx); err != nil {
		t.Fatal(err)
	}
	first := ends()
	for p, want := range map[int32]int64{0: 3, 1: 5} {
		pp := first[p]
		if !pp.Known || pp.HighWatermark != want || pp.EndAt.Before(before) {
			t.Fatalf("partition %d after a lookup: %+v, want end %d looked up after %s", p, pp, want, before)
		}
	}

	// The outage: lookups fail, the known ends keep their stamps.
	setDown(true)
	produce(1, 2) // written before the broker "goes down" for lookups only
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
	err = r.RefreshEnds(lctx)
	lcancel()
	if err == nil {
		t.Fatal("a lookup during the outage succeeded")
	}
	if outage.count() == 0 {
		t.Fatal("no ListOffsets was cut off: the test did not simulate the outage")
	}
	during := ends()
	for p := range first {
		if during[p].EndAt != first[p].EndAt || during[p].HighWatermark != first[p].HighWatermark {
			t.Errorf("partition %d: a failed lookup changed its end: %+v, was %+v", p, during[p], first[p])
		}
	}

	// Back: the next lookup is fresh and sees what was produced meanwhile.
	setDown(false)
	after := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.RefreshEnds(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lookups still fail after the outage: %v", err)
		}
	}
	back := ends()
	if pp := back[1]; pp.HighWatermark != 7 || pp.EndAt.Before(after) {
		t.Errorf("partition 1 after the outage: %+v, want end 7 looked up after %s", pp, after)
	}
	if pp := back[0]; pp.HighWatermark != 3 || pp.EndAt.Before(after) {
		t.Errorf("partition 0 after the outage: %+v, want end 3 looked up after %s", pp, after)
	}
}

// A fetch's high watermark raises the known end but never lowers it (a
// failed fetch shows none) and does not count as a fresh lookup.
func TestAdvanceKeepsEndMonotonic(t *testing.T) {
	r := &Reader{partitions: []int32{0}, pos: map[int32]int64{0: 0}, hwm: map[int32]int64{}, endAt: map[int32]time.Time{}}
	r.Advance(0, -1, -1)
	if pp := r.AppendPositions(nil)[0]; pp.Known {
		t.Fatalf("a failed fetch made the end known: %+v", pp)
	}
	r.Advance(0, 10, 4)
	r.Advance(0, 6, -1) // an older, buffered fetch
	pp := r.AppendPositions(nil)[0]
	if !pp.Known || pp.HighWatermark != 10 || pp.Next != 4 || !pp.EndAt.IsZero() {
		t.Fatalf("after fetches: %+v, want end 10, next 4, no lookup time", pp)
	}
}
