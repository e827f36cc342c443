package dataplane

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/control"
	"koala/dataplane/dptest/testkafka"
	"koala/dataplane/kafkaio"
)

func endOffsetsSum(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum
}

// TestKafkaSinkWritesEachRecordOnceInKeyOrder runs the sink operator on
// batches and checks that each batch is acknowledged when ProcessBatch
// returns (so a barrier after it cannot overtake it), and that the topic
// holds every record once, with its event time as timestamp, each key's
// records in one partition in input order; oversize records go to the
// dead-letter path instead.
func TestKafkaSinkWritesEachRecordOnceInKeyOrder(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	brokers := kc.ListenAddrs()
	adm := kadm.NewClient(mustClient(t, brokers))
	job := control.JobSpec{JobID: "j", KafkaBrokers: brokers, Params: map[string]string{control.ParamMaxRecordBytes: "100"}}
	dead, err := kafkaio.NewDeadLetters(job, "sink", "sink-0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	op, err := NewKafkaSinkFactory("out")(OperatorContext{Job: job, Spec: control.OperatorSpec{Name: "sink"}, TaskID: "sink-0", DeadLetters: dead})
	if err != nil {
		t.Fatal(err)
	}
	defer op.(Closer).Close()

	const keys, batches, perBatch = 7, 20, 50
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var sent int64
	oversize := 0
	for b := range batches {
		var in []Record
		for i := range perBatch {
			n := b*perBatch + i
			r := Record{Key: []byte(fmt.Sprintf("key-%d", n%keys)), Value: []byte(fmt.Sprint(n)), EventTime: base + int64(n)*int64(time.Millisecond)}
			if n%97 == 3 {
				r.Value = []byte(strings.Repeat("x", 200))
				oversize++
			} else {
				sent++
			}
			in = append(in, r)
		}
		if err := op.ProcessBatch(in, nil); err != nil {
			t.Fatal(err)
		}
		if got := endOffsetsSum(t, adm, "out"); got != sent {
			t.Fatalf("after batch %d: topic end offsets sum to %d, want %d (a batch must be acknowledged when ProcessBatch returns)", b, got, sent)
		}
	}
	parts := testkafka.ReadTopic(t, brokers, "out", int(sent))
	seen := map[string]bool{}
	keyPart := map[string]int32{}
	last := map[string]int{}
	for p, recs := range parts {
		for _, r := range recs {
			var n int
			if _, err := fmt.Sscan(string(r.Value), &n); err != nil {
				t.Fatalf("value %q: %v", r.Value, err)
			}
			if seen[string(r.Value)] {
				t.Fatalf("record %d written twice", n)
			}
			seen[string(r.Value)] = true
			k := string(r.Key)
			if q, ok := keyPart[k]; ok && q != p {
				t.Fatalf("key %s in partitions %d and %d", k, q, p)
			}
			keyPart[k] = p
			if prev, ok := last[k]; ok && n <= prev {
				t.Fatalf("key %s: record %d after %d", k, n, prev)
			}
			last[k] = n
			if want := time.Unix(0, base+int64(n)*int64(time.Millisecond)); !r.Timestamp.Equal(want) {
				t.Fatalf("record %d timestamp %v, want %v", n, r.Timestamp, want)
			}
		}
	}
	if c := dead.Counts(); c.Oversize != uint64(oversize) || c.Malformed != 0 {
		t.Fatalf("dead-letter counts %+v, want %d oversize", c, oversize)
	}
	if got := op.(CounterReporter).Counters()["kafka_sink_written"]; got != uint64(sent) {
		t.Fatalf("kafka_sink_written %d, want %d", got, sent)
	}
}

func TestKafkaSinkConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, topic string
		job         control.JobSpec
		want        string
	}{
		{"no topic", "", control.JobSpec{KafkaBrokers: []string{"127.0.0.1:1"}}, control.ParamKafkaSinkTopic},
		{"no brokers", "out", control.JobSpec{Params: map[string]string{control.ParamKafkaSinkBrokers: " , "}}, control.ParamKafkaSinkBrokers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewKafkaSinkFactory(tc.topic)(OperatorContext{Job: tc.job, Spec: control.OperatorSpec{Name: "sink"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func mustClient(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
