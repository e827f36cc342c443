package examples_test

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"koala/queries"
	"koala/queries/examples"
	"koala/workflows/wftest"
)

// TestExactnessMatrix rescales each of the core and example queries out
// and back in while input flows, under every protocol, and checks the
// output against an oracle recomputed from the input (and, where the
// output keeps per-key order, the order).
func TestExactnessMatrix(t *testing.T) {
	in := input(4000, 60, base, time.Millisecond)
	counts := func(t *testing.T, r *wftest.Run, want map[string]uint64) {
		t.Helper()
		got := r.SinkValues()
		var diff []string
		for k, w := range want {
			if got[k] != w {
				diff = append(diff, fmt.Sprintf("%s: got %d, want %d", k, got[k], w))
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				diff = append(diff, fmt.Sprintf("%s: got %d, want none", k, g))
			}
		}
		if len(diff) > 0 {
			sort.Strings(diff)
			t.Fatalf("%d of %d keys differ from the oracle, e.g.\n%s", len(diff), len(want), strings.Join(diff[:min(10, len(diff))], "\n"))
		}
	}
	perKey := map[string]uint64{}
	for _, r := range in {
		perKey[string(r.Key)]++
	}
	// group-sum adds each key's running counts 1, 2, …, n: n(n+1)/2 a key.
	perGroup := map[string]uint64{}
	for k, n := range perKey {
		perGroup[string(queries.GroupOf([]byte(k)))] += n * (n + 1) / 2
	}
	cases := []wftest.MatrixCase{
		{Query: "hello", Operator: "mapper", From: 1, To: 3, Input: in},
		{Query: "counter", Operator: "counter", Input: in, Check: func(t *testing.T, r *wftest.Run, _ wftest.Result) { counts(t, r, perKey) }},
		{Query: "two-counters", Operator: "groupsum", Input: in, Check: func(t *testing.T, r *wftest.Run, _ wftest.Result) { counts(t, r, perGroup) }},
		{Query: examples.Counter.Name(), Operator: "counter", Input: in, Check: func(t *testing.T, r *wftest.Run, _ wftest.Result) { counts(t, r, perKey) }},
		{Query: examples.Mapper.Name(), Operator: "mapper", Input: in},
		{Query: examples.Filter.Name(), Operator: "filter", Input: in, Check: func(t *testing.T, _ *wftest.Run, res wftest.Result) {
			even := uint64(0)
			for _, r := range in {
				if binary.LittleEndian.Uint64(r.Value)%2 == 0 {
					even++
				}
			}
			if res.Sink.Received != even || res.Sink.Distinct != even {
				t.Fatalf("sink ledger %+v, want the %d even records once each", res.Sink, even)
			}
		}},
		{Query: examples.TumblingWindow.Name(), Operator: "window", Input: in, Check: func(t *testing.T, r *wftest.Run, _ wftest.Result) {
			want := map[string]uint64{}
			for _, rec := range in {
				end := (rec.EventTime/int64(time.Second) + 1) * int64(time.Second) / int64(time.Millisecond)
				want[fmt.Sprintf("%s@%d", rec.Key, end)]++
			}
			counts(t, r, want)
		}},
	}
	wftest.RunMatrix(t, cases)
}
