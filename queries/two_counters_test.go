package queries_test

import (
	"fmt"
	"testing"

	"koala/dataplane"
	"koala/dataplane/produce"
	"koala/queries"
	"koala/workflows/wftest"
)

// TestTwoCountersMatchesOracle runs the registered two-counters query and
// compares each group's final sum with Σ n(n+1)/2 over the group's keys
// (n = a key's number of records), computed from the input alone.
func TestTwoCountersMatchesOracle(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const n, numKeys = 4000, 300
	in := make([]dataplane.Record, n)
	perKey := map[string]uint64{}
	for i := range in {
		k := produce.KeyName(produce.UniformKeyIndex(7, numKeys, int64(i)))
		in[i] = dataplane.Record{Key: []byte(k), Value: []byte{1}}
		perKey[k]++
	}
	want := map[string]uint64{}
	for k, c := range perKey {
		want[string(queries.GroupOf([]byte(k)))] += c * (c + 1) / 2
	}
	r := wftest.Start(t, wftest.Options{Query: "two-counters", Parallelism: map[string]int{"counter": 2, "groupsum": 3}})
	r.Produce(in)
	res := r.Run()
	if got := r.SinkValues(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("group sums differ:\ngot  %v\nwant %v", got, want)
	}
	if res.Sink.Received != n || res.Sink.Distinct != n || res.Sink.Duplicates != 0 {
		t.Fatalf("sink ledger %+v, want %d records once each", res.Sink, n)
	}
	if why := queries.Unchecked("two-counters"); why != "" {
		t.Fatalf("two-counters is ledger-checked, Unchecked = %q", why)
	}
}

func TestGroupOf(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"k0001234", "g34"},
		{"k0000099", "g99"},
		{"a", "ga"},
		{"", "g"},
	} {
		if got := string(queries.GroupOf([]byte(tc.key))); got != tc.want {
			t.Errorf("GroupOf(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
