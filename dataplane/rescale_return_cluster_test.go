package dataplane_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/examples"
	"koala/workflows"
	"koala/workflows/wftest"
)

var returnRescaleQuery = dataplane.NewQuery("test-return-rescale").
	Source("source", 1).
	KeyedStateful("count", []string{"count"}, examples.CountRecord).
	RecordSink("sink")

// TestLazyRescaleBucketsComeBack scales a keyed counter 1→2→1→2 lazily,
// in both migration modes, with keys that receive records only before the first
// move and after the last: the new task never fetched them, so they never
// left the first task's store while their buckets were away and back, and
// the last scale-out must hand them over again (fetch-on-demand; in
// eventual mode the background migration may or may not have taken them).
// Each must count on from where it was.
func TestLazyRescaleBucketsComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	for _, mode := range []string{control.ModeFetchOnDemand, control.ModeEventual} {
		t.Run(mode, func(t *testing.T) { runReturnRescale(t, mode) })
	}
}

func runReturnRescale(t *testing.T, mode string) {
	keys := func(prefix string, n int) []dataplane.Record {
		var out []dataplane.Record
		for i := range n {
			out = append(out, dataplane.Record{Key: []byte(fmt.Sprintf("%s%03d", prefix, i))})
		}
		return out
	}
	outputs := func(n int) func(r *wftest.Run) bool {
		return func(r *wftest.Run) bool { return len(r.Output()) >= n }
	}
	const n = 200
	run := wftest.Start(t, wftest.Options{
		Query:   registerQuery(t, returnRescaleQuery),
		Params:  map[string]string{control.ParamMigrationMode: mode},
		Backend: "pebble",
		Workers: 3,
		Phases: []wftest.Phase{
			{Records: keys("k", n), Until: outputs(n), Then: func(r *wftest.Run) { r.Rescale(workflows.ReconfigureLazy, "count", 2) }},
			{Records: keys("x", n), Until: outputs(2 * n), Then: func(r *wftest.Run) { r.Rescale(workflows.ReconfigureLazy, "count", 1) }},
			{Records: keys("y", n), Until: outputs(3 * n), Then: func(r *wftest.Run) { r.Rescale(workflows.ReconfigureLazy, "count", 2) }},
			{Records: keys("k", n)},
		},
	})
	res := run.Run()
	last := map[string]uint64{}
	for _, r := range res.Output {
		last[string(r.Key)] = max(last[string(r.Key)], binary.LittleEndian.Uint64(r.Value))
	}
	bad := 0
	for i := range n {
		k := fmt.Sprintf("k%03d", i)
		if last[k] != 2 {
			if bad < 5 {
				t.Errorf("key %s: counted to %d, want 2 (its first record's count was lost)", k, last[k])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d keys lost their count across 1→2→1→2", bad, n)
	}
}
