package dataplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/workflows/wftest"
)

// deadLetterQuery parses JSON events {"id": n, "pad": p}: records that do
// not parse or lack "id" go to the dead-letter path; good ones leave as
// "n:" plus p bytes of padding through a Kafka sink.
var deadLetterQuery = dataplane.NewQuery("test-deadletter").
	Source("source", 1).
	Process("parse", func(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
		return dataplane.OperatorFunc(func(in []dataplane.Record, emit dataplane.Emit) error {
			for _, r := range in {
				var ev struct {
					ID  *int64 `json:"id"`
					Pad int    `json:"pad"`
				}
				if err := json.Unmarshal(r.Value, &ev); err != nil {
					ctx.DeadLetters.Reject(r, kafkaio.ReasonMalformed, err)
					continue
				}
				if ev.ID == nil {
					ctx.DeadLetters.Reject(r, kafkaio.ReasonMalformed, errors.New(`field "id" is missing`))
					continue
				}
				r.Value = fmt.Appendf(nil, "%d:%s", *ev.ID, strings.Repeat("p", ev.Pad))
				emit(r)
			}
			return nil
		}), nil
	}, false).Parallelism(2).
	KafkaSink("sink", "out")

// TestDeadLetterPipeline feeds good, malformed and oversize records
// through source → parse → Kafka sink with a dead-letter topic: every good
// record reaches the output topic exactly once and in key order, every bad
// one is in the dead-letter topic once with the operator and reason that
// rejected it, and the task counters and metric rows agree.
func TestDeadLetterPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const maxBytes = 512
	var input []dataplane.Record
	type bad struct{ operator, reason string }
	wantBad := map[string]bad{} // value → where it must be rejected
	var good []int64
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := int64(0); i < 3000; i++ {
		key := []byte(produce.KeyName(int(i % 37)))
		var v string
		switch {
		case i%101 == 7:
			v = fmt.Sprintf(`{"id": %d, "pad": `, i) // truncated JSON
			wantBad[v] = bad{"parse", kafkaio.ReasonMalformed}
		case i%103 == 11:
			v = fmt.Sprintf(`{"ident": %d}`, i) // missing field
			wantBad[v] = bad{"parse", kafkaio.ReasonMalformed}
		case i%107 == 13:
			v = fmt.Sprintf(`{"id": %d, "junk": "%s"}`, i, strings.Repeat("j", maxBytes)) // too large at the source
			wantBad[v[:maxBytes-len(key)]] = bad{"source", kafkaio.ReasonOversize}        // cut to fit
		case i%109 == 17:
			v = fmt.Sprintf(`{"id": %d, "pad": %d}`, i, maxBytes) // output too large at the sink
			wantBad[fmt.Sprintf("%d:%s", i, strings.Repeat("p", maxBytes))[:maxBytes-len(key)]] = bad{"sink", kafkaio.ReasonOversize}
		default:
			v = fmt.Sprintf(`{"id": %d, "pad": 3}`, i)
			good = append(good, i)
		}
		input = append(input, dataplane.Record{Key: key, Value: []byte(v), EventTime: t0 + i*int64(time.Millisecond)})
	}
	rec := metrics.NewMemory()
	run := wftest.Start(t, wftest.Options{
		Query:       registerQuery(t, deadLetterQuery),
		Parallelism: map[string]int{"sink": 2},
		Params:      map[string]string{control.ParamDeadLetterTopic: "dlq", control.ParamMaxRecordBytes: strconv.Itoa(maxBytes), control.ParamKafkaSinkTopic: "out"},
		Workers:     2,
		Recorder:    rec,
		Phases:      []wftest.Phase{{Records: input[:1500]}, {Records: input[1500:]}},
	})
	adm := kadm.NewClient(newClient(t, run.Cluster.Brokers))
	if _, err := adm.CreateTopics(run.Ctx, 3, 1, nil, "out", "dlq"); err != nil {
		t.Fatal(err)
	}
	res := run.Run()

	// Output: every good record once, each key in one partition, in order.
	out := consume(t, run.Cluster.Brokers, "out", len(good))
	seen := map[int64]bool{}
	lastOf, partOf := map[string]int64{}, map[string]int32{}
	for _, r := range out {
		idText, _, _ := strings.Cut(string(r.Value), ":")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil || seen[id] {
			t.Fatalf("output %q: duplicate or unparsable (%v)", r.Value, err)
		}
		seen[id] = true
		k := string(r.Key)
		if last, ok := lastOf[k]; ok && (id <= last || partOf[k] != r.Partition) {
			t.Fatalf("key %s: id %d (partition %d) after %d (partition %d)", k, id, r.Partition, last, partOf[k])
		}
		lastOf[k], partOf[k] = id, r.Partition
		if want := t0 + id*int64(time.Millisecond); r.Timestamp.UnixNano() != want {
			t.Fatalf("id %d: timestamp %v, want the event time %v", id, r.Timestamp, time.Unix(0, want))
		}
	}
	for _, id := range good {
		if !seen[id] {
			t.Fatalf("good record %d missing from the output", id)
		}
	}

	// Dead letters: every bad record once, with who rejected it and why.
	dl := consume(t, run.Cluster.Brokers, "dlq", len(wantBad))
	byReason := map[string]uint64{}
	for _, r := range dl {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		w, ok := wantBad[string(r.Value)]
		if !ok {
			t.Fatalf("unexpected dead letter %.60q (headers %v)", r.Value, h)
		}
		delete(wantBad, string(r.Value))
		if h[kafkaio.HeaderOperator] != w.operator || h[kafkaio.HeaderReason] != w.reason ||
			!strings.HasPrefix(h[kafkaio.HeaderTask], w.operator+"-") || h[kafkaio.HeaderError] == "" ||
			(w.reason == kafkaio.ReasonOversize) != (h[kafkaio.HeaderOriginalBytes] != "") {
			t.Fatalf("dead letter %.60q: headers %v, want operator %s, reason %s", r.Value, h, w.operator, w.reason)
		}
		byReason[w.operator+"/"+w.reason]++
	}
	t.Logf("%d good records out, dead letters by operator/reason: %v", len(out), byReason)

	// Counters of the tasks, and the same totals in the metric rows.
	want := map[string]uint64{
		"parse/deadletter_malformed": byReason["parse/malformed"],
		"source/deadletter_oversize": byReason["source/oversize"],
		"sink/deadletter_oversize":   byReason["sink/oversize"],
		"all/deadletter_written":     uint64(len(dl)),
		"all/deadletter_failed":      0,
	}
	for k, v := range want {
		op, name, _ := strings.Cut(k, "/")
		if op == "all" {
			op = ""
		}
		if got := res.Counter(op, name); got != v {
			t.Errorf("counter %s = %d, want %d", k, got, v)
		}
	}
	if got := res.Counter("sink", "kafka_sink_written"); got != uint64(len(good)) {
		t.Errorf("kafka_sink_written = %d, want %d", got, len(good))
	}
	sums := func() (malformed, oversize, dead uint64) {
		for _, r := range rec.Tasks() {
			if r.Job == run.Job.JobID {
				malformed, oversize, dead = malformed+r.Malformed, oversize+r.Oversize, dead+r.DeadLettered
			}
		}
		return
	}
	wantOversize := byReason["source/oversize"] + byReason["sink/oversize"]
	deadline := time.Now().Add(30 * time.Second) // rows are written once a second
	for {
		m, o, d := sums()
		if m == byReason["parse/malformed"] && o == wantOversize && d == uint64(len(dl)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric rows sum to malformed %d, oversize %d, dead-lettered %d; want %d, %d, %d",
				m, o, d, byReason["parse/malformed"], wantOversize, len(dl))
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

func newClient(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// consume reads topic from the start until it holds want records (polling
// with a deadline), then checks that nothing more arrives briefly.
func consume(t *testing.T, brokers []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	cancel()
	if len(out) != want {
		t.Fatalf("topic %s holds %d records, want %d", topic, len(out), want)
	}
	return out
}
