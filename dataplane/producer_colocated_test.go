package dataplane

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"koala/dataplane/control"
	"koala/dataplane/dptest/testkafka"
	"koala/dataplane/produce"
)

// Two producers of one job on one worker run side by side, and each stop
// reports its own producer: nothing is counted twice or left running.
func TestProducersOfOneJobShareAWorker(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &Worker{opts: Options{ID: "w3"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), producers: map[string]*produce.Producer{}, ctx: ctx}
	shares := produce.SplitProduce(control.ProduceRequest{Topic: "in", KafkaBrokers: kc.ListenAddrs(), Generator: "keys", NumKeys: 10, RatePerSec: 3000, MaxEvents: 301}, 2)
	for _, s := range shares {
		if err := w.startProducer("job", s); err != nil {
			t.Fatal(err)
		}
	}
	// Both run to their MaxEvents share before they are stopped.
	for key, p := range w.producers {
		select {
		case <-p.Done():
		case <-ctx.Done():
			t.Fatalf("producer %s did not finish its share", key)
		}
	}
	if len(w.producers) != 2 {
		t.Fatalf("%d producers registered, want 2", len(w.producers))
	}
	var total int64
	for i, s := range shares {
		rep, err := w.stopProducer(ctx, "job", s.Producer)
		if err != nil {
			t.Fatalf("stop producer %d: %v", i, err)
		}
		if rep.Acked != s.MaxEvents {
			t.Errorf("producer %d acked %d, its share is %d", i, rep.Acked, s.MaxEvents)
		}
		total += rep.Acked
	}
	got := 0
	for _, recs := range testkafka.ReadTopic(t, kc.ListenAddrs(), "in", int(total)) {
		got += len(recs)
	}
	if total == 0 || int64(got) != total {
		t.Fatalf("reports add up to %d acked, the topic holds %d records", total, got)
	}
	if _, err := w.stopProducer(ctx, "job", 2); err == nil {
		t.Error("stopping a producer that never started succeeded")
	}
}
