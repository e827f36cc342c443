package kafkaio

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"koala/dataplane/control"
	"koala/dataplane/dptest/testkafka"
	"koala/dataplane/wire"
)

// TestDeadLettersWriteWithHeaders writes rejected records to a kfake topic
// and checks counts, headers and that nothing is written without a topic.
func TestDeadLettersWriteWithHeaders(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	job := control.JobSpec{KafkaBrokers: kc.ListenAddrs(), Params: map[string]string{control.ParamDeadLetterTopic: "dlq", control.ParamMaxRecordBytes: "8"}}
	d, err := NewDeadLetters(job, "parse", "parse-3", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Reject(wire.Record{Key: []byte("a"), Value: []byte("{bad"), Partition: 2, Offset: 41, EventTime: 5e9}, ReasonMalformed, errors.New("unexpected end"))
	d.Reject(wire.Record{Key: []byte("b"), Value: []byte("big record"), Partition: 1, Offset: 7}, ReasonOversize, nil)
	d.Flush(context.Background())
	d.Close()
	if c := d.Counts(); c != (DeadLetterCounts{Malformed: 1, Oversize: 1, Written: 2}) {
		t.Fatalf("counts %+v", c)
	}
	recs := testkafka.ReadTopic(t, kc.ListenAddrs(), "dlq", 2)[0]
	h := map[string]string{}
	for _, kv := range recs[0].Headers {
		h[kv.Key] = string(kv.Value)
	}
	want := map[string]string{HeaderOperator: "parse", HeaderTask: "parse-3", HeaderReason: ReasonMalformed,
		HeaderError: "unexpected end", HeaderPartition: "2", HeaderOffset: "41"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q", k, h[k], v)
		}
	}
	if string(recs[0].Value) != "{bad" || recs[0].Timestamp.UnixNano() != 5e9 {
		t.Fatalf("record %q@%v", recs[0].Value, recs[0].Timestamp)
	}
	// The oversize record is cut to the limit so the topic takes it.
	last := recs[1].Headers[len(recs[1].Headers)-1]
	if string(recs[1].Key) != "b" || string(recs[1].Value) != "big rec" || last.Key != HeaderOriginalBytes || string(last.Value) != "11" {
		t.Fatalf("oversize record %q=%q, last header %s=%s", recs[1].Key, recs[1].Value, last.Key, last.Value)
	}

	// Without a topic: counted, nothing to write.
	d2, err := NewDeadLetters(control.JobSpec{}, "parse", "parse-0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d2.Reject(wire.Record{}, "", nil)
	d2.Flush(context.Background())
	if c := d2.Counts(); c != (DeadLetterCounts{Malformed: 1}) || d2.client != nil {
		t.Fatalf("without a topic: counts %+v, client %v", c, d2.client)
	}
}

func TestMaxRecordBytesParam(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int
		err  string
	}{
		{"", DefaultMaxRecordBytes, ""},
		{"2048", 2048, ""},
		{"0", 0, "MaxRecordBytes \"0\": want a whole number of bytes between 1 and"},
		{"1k", 0, "MaxRecordBytes \"1k\""},
		{"2000000000", 0, "MaxRecordBytes \"2000000000\""},
	} {
		got, err := MaxRecordBytesOf(control.JobSpec{Params: map[string]string{control.ParamMaxRecordBytes: tc.v}})
		if tc.err == "" && (err != nil || got != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("MaxRecordBytes %q: %d, %v; want %d, error containing %q", tc.v, got, err, tc.want, tc.err)
		}
	}
	if _, err := NewDeadLetters(control.JobSpec{Params: map[string]string{control.ParamDeadLetterTopic: "dlq"}}, "op", "op-0", nil, nil); err == nil ||
		!strings.Contains(err.Error(), control.ParamDeadLetterTopic) {
		t.Fatalf("dead-letter topic without brokers: %v", err)
	}
}
