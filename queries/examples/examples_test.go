package examples_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/produce"
	"koala/queries"
	"koala/queries/examples"
	"koala/workflows/wftest"
)

var registered sync.Map

// registerForTest registers a test variant of a query once per process.
func registerForTest(t *testing.T, q *dataplane.QueryBuilder) {
	t.Helper()
	if _, dup := registered.LoadOrStore(q.Name(), true); dup {
		return
	}
	if err := queries.Register(queries.Query{Name: q.Name(), Operators: q.MustBuild()}); err != nil {
		t.Fatal(err)
	}
}

// input is n records over numKeys keys; record i has value i (8 bytes LE)
// and event time base + i·step.
func input(n, numKeys int, base int64, step time.Duration) []dataplane.Record {
	out := make([]dataplane.Record, n)
	for i := range out {
		out[i] = dataplane.Record{
			Key:       []byte(produce.KeyName(produce.UniformKeyIndex(3, numKeys, int64(i)))),
			Value:     binary.LittleEndian.AppendUint64(nil, uint64(i)),
			EventTime: base + int64(i)*int64(step),
		}
	}
	return out
}

const base = int64(1_700_000_000_000) * int64(time.Millisecond)

func TestCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	in := input(3000, 50, base, time.Millisecond)
	want := map[string]uint64{}
	for _, r := range in {
		want[string(r.Key)]++
	}
	r := wftest.Start(t, wftest.Options{Query: examples.Counter.Name()})
	r.Produce(in)
	res := r.Run()
	got := r.SinkValues()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts differ:\ngot  %v\nwant %v", got, want)
	}
	if res.Sink.Received != uint64(len(in)) || res.Sink.Duplicates != 0 {
		t.Fatalf("sink ledger %+v, want %d records once each", res.Sink, len(in))
	}
}

func TestFilter(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	in := input(2001, 40, base, time.Millisecond)
	in = append(in, dataplane.Record{Key: []byte("short"), Value: []byte{1}}) // too short: filtered out
	res := wftest.RunQuery(t, wftest.Options{Query: examples.Filter.Name(), Phases: []wftest.Phase{{Records: in}}})
	if res.Sink.Received != 1001 || res.Sink.Distinct != 1001 {
		t.Fatalf("sink ledger %+v, want the 1001 even records", res.Sink)
	}
}

func TestMapper(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	in := input(1500, 30, base, time.Millisecond)
	res := wftest.RunQuery(t, wftest.Options{Query: examples.Mapper.Name(), Phases: []wftest.Phase{{Records: in}}})
	if res.Sink.Received != uint64(len(in)) || res.Sink.Distinct != uint64(len(in)) {
		t.Fatalf("sink ledger %+v, want %d records", res.Sink, len(in))
	}
	// The same map into a record sink, to check what it emits.
	q := mapperRecords
	registerForTest(t, q)
	res = wftest.RunQuery(t, wftest.Options{Query: q.Name(), Phases: []wftest.Phase{{Records: in}}})
	var want []dataplane.Record
	for _, r := range in {
		want = append(want, dataplane.Record{Key: bytes.ToUpper(r.Key), Value: r.Value})
	}
	if d := wftest.Diff(wftest.Lines(res.Output, nil), wftest.Lines(want, nil)); d != "" {
		t.Fatal(d)
	}
}

// TestTumblingWindow checks per-key window counts against an oracle,
// with records on window boundaries, disorder within the bound and late
// records sent after their window fired.
func TestTumblingWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const numKeys = 20
	// Phase 1: 6 s of event time, 2 ms apart, with local disorder of up
	// to 100 ms (bound 200 ms), and records exactly on window starts.
	var p1 []dataplane.Record
	edge := func(ts int64) { p1 = append(p1, dataplane.Record{Key: []byte("edge"), EventTime: ts}) }
	for i := 0; i < 3000; i++ {
		ts := base + int64(i)*int64(2*time.Millisecond)
		if i%500 == 0 { // 1 s: the last ms of the previous window, the first of this one
			if i > 0 {
				edge(ts - int64(time.Millisecond))
			}
			edge(ts)
		}
		if i%7 == 3 {
			ts -= int64(100 * time.Millisecond)
		}
		p1 = append(p1, dataplane.Record{Key: []byte(produce.KeyName(i % numKeys)), Value: []byte("x"), EventTime: ts})
	}
	edge(base + 6*int64(time.Second) - int64(time.Millisecond))
	// Phase 2, sent once the 2nd window fired: late records (their windows
	// are done) and more on-time records.
	late := []dataplane.Record{
		{Key: []byte(produce.KeyName(1)), EventTime: base + 500*int64(time.Millisecond)},
		{Key: []byte("edge"), EventTime: base + int64(time.Second)},
	}
	var p2 []dataplane.Record
	p2 = append(p2, late...)
	for i := 0; i < 500; i++ {
		p2 = append(p2, dataplane.Record{Key: []byte(produce.KeyName(i % numKeys)), EventTime: base + int64(7*time.Second) + int64(i)*int64(time.Millisecond)})
	}
	want := map[string]uint64{}
	for _, r := range append(p1, p2[len(late):]...) {
		want[string(dataplane.WindowResultKey(r.Key, (r.EventTime/int64(time.Second)+1)*int64(time.Second)))]++
	}
	secondWindow := string(dataplane.WindowResultKey([]byte("edge"), base+2*int64(time.Second)))
	run := wftest.Start(t, wftest.Options{
		Query: examples.TumblingWindow.Name(),
		Phases: []wftest.Phase{
			{Records: p1, Until: func(r *wftest.Run) bool { return r.SinkValues()[secondWindow] > 0 }},
			{Records: p2},
		},
	})
	res := run.Run()
	got := run.SinkValues()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("window %s: count %d, want %d", k, got[k], v)
			}
		}
		t.Fatalf("%d windows, want %d", len(got), len(want))
	}
	if n := res.Counter("window", "late_records"); n != uint64(len(late)) {
		t.Fatalf("late records counted: %d, want %d", n, len(late))
	}
	if n := res.Counter("window", "windows_fired"); n != uint64(len(want)) {
		t.Fatalf("windows fired: %d, want %d (each exactly once)", n, len(want))
	}
}

var mapperRecords = dataplane.NewQuery("example-mapper-records").Source("source", 1).Map("mapper", examples.UpperKey).RecordSink("sink")
