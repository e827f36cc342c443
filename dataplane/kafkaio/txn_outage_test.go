package kafkaio

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Regression (koala soak, seed 11, restart-kafka 24 s into a lazy
// segment): the broker was restarted while a sink task committed the
// transaction of a completed checkpoint; franz-go gave up on the commit
// with "unable to dial: connection refused", the task failed and with it
// the job. The commit's outcome is unknown, not negative: the sink now
// commits the transaction by id once the broker is back, at a checkpoint's
// commit and at the end of the input.
func TestTxnCommitSurvivesBrokerOutage(t *testing.T) {
	const topic = "out"
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The outage: every EndTxn is cut off (its connection closed before
	// the broker handles it) until the outage ends.
	outage := cutRequests(kc, kmsg.EndTxn)
	setDown := outage.set

	// Few quick retries, so that franz-go gives up within the outage as
	// it did against the restarting broker.
	opts := []kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic(topic), kgo.RequestRetries(1), kgo.RetryTimeout(500 * time.Millisecond)}
	x := NewTxn("koala/j/sink-0", opts, func(context.Context, string) (bool, error) { return true, nil })
	defer x.Close()
	write := func(name string, n int) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%3), Value: fmt.Appendf(nil, "%s%d", name, i)})
		}
		if err := x.Write(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}

	write("a", 20)
	if _, err := x.PreCommit(ctx, "cp-000001", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	write("b", 10) // held until cp-000001's outcome
	setDown(true)
	time.AfterFunc(3*time.Second, func() { setDown(false) })
	began := time.Now()
	if err := x.Commit(ctx, "cp-000001"); err != nil {
		t.Fatalf("commit during a broker outage: %v", err)
	}
	t.Logf("commit of cp-000001 went through a %s outage (%d EndTxn requests cut off)", time.Since(began).Round(100*time.Millisecond), outage.count())
	if outage.count() == 0 {
		t.Fatal("no EndTxn was cut off: the test did not simulate the outage")
	}

	// The sink goes on: the next checkpoint commits too.
	write("c", 10)
	if _, err := x.PreCommit(ctx, "cp-000002", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := x.Commit(ctx, "cp-000002"); err != nil {
		t.Fatal(err)
	}
	// The end of the input commits the open transaction, also through
	// an outage.
	write("d", 10)
	setDown(true)
	time.AfterFunc(2*time.Second, func() { setDown(false) })
	if err := x.Finish(ctx); err != nil {
		t.Fatalf("end of input during a broker outage: %v", err)
	}
	got := committedValues(ctx, t, kc.ListenAddrs(), topic)
	for _, b := range []struct {
		name string
		n    int
	}{{"a", 20}, {"b", 10}, {"c", 10}, {"d", 10}} {
		for i := range b.n {
			if v := fmt.Sprintf("%s%d", b.name, i); got[v] != 1 {
				t.Errorf("%s visible %d times to read_committed, want once", v, got[v])
			}
		}
	}
	if len(got) != 50 {
		t.Errorf("read_committed sees %d distinct records, want 50", len(got))
	}
}

// committedValues reads topic as a read_committed consumer up to its last
// stable offsets and counts each value.
func committedValues(ctx context.Context, t *testing.T, brokers []string, topic string) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	lso.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	next := map[int32]int64{}
	out := map[string]int{}
	for p, end := range want {
		for next[p] < end {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read_committed: %v", ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				next[r.Partition] = r.Offset + 1
				if !r.Attrs.IsControl() && r.Offset < want[r.Partition] {
					out[string(r.Value)]++
				}
			})
		}
	}
	return out
}
