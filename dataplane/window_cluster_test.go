package dataplane_test

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries"
	"koala/workflows"
	"koala/workflows/wftest"
)

var registerOnce sync.Map

// registerQuery registers a test query once per process.
func registerQuery(t testing.TB, q *dataplane.QueryBuilder) string {
	t.Helper()
	if _, dup := registerOnce.LoadOrStore(q.Name(), true); !dup {
		if err := queries.Register(queries.Query{Name: q.Name(), Operators: q.MustBuild()}); err != nil {
			t.Fatal(err)
		}
	}
	return q.Name()
}

var windowRescaleQuery = dataplane.NewQuery("test-window-rescale").
	Source("source", 1).
	Window("window", dataplane.Tumbling(time.Second), func() dataplane.Aggregator { return dataplane.CountAggregator{} }).Parallelism(2).
	RecordSink("sink")

const sec = int64(time.Second)

var t0 = int64(1_700_000_000) * sec

// TestWindowAcrossLazyRescale rescales a window operator 2→4→2 with the
// lazy protocol (both migration modes) and stop-and-restart while windows are pending, including
// windows of keys that receive no record after the move: every (key,
// window) must fire exactly once with its full count.
func TestWindowAcrossLazyRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	for _, mode := range []string{control.ModeFetchOnDemand, control.ModeEventual} {
		t.Run("lazy-"+mode, func(t *testing.T) { runWindowRescale(t, workflows.ReconfigureLazy, mode) })
	}
	t.Run("stop-and-restart", func(t *testing.T) {
		runWindowRescale(t, workflows.ReconfigureStopAndRestart, control.ModeEventual)
	})
}

func runWindowRescale(t *testing.T, protocol any, mode string) {
	const numKeys = 40
	phase := func(from, to int64, extra ...dataplane.Record) []dataplane.Record {
		var out []dataplane.Record
		for ts, i := t0+from*sec, 0; ts < t0+to*sec; ts, i = ts+int64(3*time.Millisecond), i+1 {
			out = append(out, dataplane.Record{Key: []byte(produce.KeyName(i % numKeys)), EventTime: ts})
		}
		out = append(out, extra...)
		sort.SliceStable(out, func(i, j int) bool { return out[i].EventTime < out[j].EventTime })
		return out
	}
	// Keys seen only early: their last window is pending during the moves.
	var early []dataplane.Record
	for i := 0; i < 30; i++ {
		early = append(early, dataplane.Record{Key: []byte(fmt.Sprintf("early-%02d", i)), EventTime: t0 + 2*sec + int64(i)*int64(10*time.Millisecond)})
	}
	p1 := phase(0, 3, early...)
	p2 := phase(3, 6)
	p3 := phase(6, 9)
	want := map[string]uint64{}
	for _, r := range append(append(append([]dataplane.Record{}, p1...), p2...), p3...) {
		want[string(dataplane.WindowResultKey(r.Key, (r.EventTime/sec+1)*sec))]++
	}
	firstWindow := string(dataplane.WindowResultKey([]byte(produce.KeyName(0)), t0+sec))
	fired := func(key string) func(r *wftest.Run) bool {
		return func(r *wftest.Run) bool {
			for _, rec := range r.Output() {
				if string(rec.Key) == key {
					return true
				}
			}
			return false
		}
	}
	run := wftest.Start(t, wftest.Options{
		Query:   registerQuery(t, windowRescaleQuery),
		Params:  map[string]string{control.ParamMigrationMode: mode, control.ParamGradualBatchSize: "10"},
		Backend: "pebble",
		Workers: 3,
		Phases: []wftest.Phase{
			{Records: p1, Until: fired(firstWindow), Then: func(r *wftest.Run) { r.Rescale(protocol, "window", 4) }},
			{Records: p2, Until: fired(string(dataplane.WindowResultKey([]byte(produce.KeyName(0)), t0+4*sec))),
				Then: func(r *wftest.Run) { r.Rescale(protocol, "window", 2) }},
			{Records: p3},
		},
	})
	res := run.Run()
	got := map[string]uint64{}
	var dups []string
	for _, r := range res.Output {
		k := string(r.Key)
		if _, dup := got[k]; dup {
			dups = append(dups, k)
		}
		got[k] = binary.LittleEndian.Uint64(r.Value)
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		t.Errorf("%d windows fired more than once, e.g. %v", len(dups), dups[:min(5, len(dups))])
	}
	bad := 0
	for k, v := range want {
		if got[k] != v {
			if bad < 5 {
				t.Errorf("window %s: count %d, want %d", k, got[k], v)
			}
			bad++
		}
	}
	if len(got) != len(want) || bad > 0 {
		t.Fatalf("%d windows, want %d; %d wrong", len(got), len(want), bad)
	}
	if n := res.Counter("window", "late_records"); n != 0 {
		t.Fatalf("%d late records, want none", n)
	}
	t.Logf("%s: %d windows exact across 2→4→2", t.Name(), len(want))
}
