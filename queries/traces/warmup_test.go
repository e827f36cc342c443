package traces_test

import (
	"bytes"
	"fmt"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries/traces"
)

// sequential returns records 0..n-1 of generator q's warm-up stream over
// numKeys key indices.
func sequential(t *testing.T, q string, numKeys, n int) []dataplane.Record {
	t.Helper()
	g, err := produce.NewGenerator(control.ProduceRequest{Generator: q, NumKeys: numKeys, Seed: 5, Sequential: true})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]dataplane.Record, n)
	for i := range out {
		g.Next(int64(i), &out[i])
		out[i].Key = bytes.Clone(out[i].Key)
	}
	return out
}

// A warm-up stream has one new key per record, and the keys a measurement
// run draws over the warmed key space were all warmed.
func TestSequentialWarmUpStream(t *testing.T) {
	const warm = 9 * 500
	for _, tc := range []struct {
		q string
		// measured: the measurement's NumKeys whose keys the warm-up covers.
		measured int
		key      func(r dataplane.Record) string
	}{
		{q: traces.Borg, measured: warm / 9},
		{q: traces.Azure, measured: warm},
		// taxi's records are keyed by pickup cell; movingMedianTripTime's key is the route.
		{q: traces.Taxi, measured: warm, key: func(r dataplane.Record) string {
			tr, err := traces.ParseTrip(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			from, _ := traces.CellOf(tr.PickupLon, tr.PickupLat)
			to, _ := traces.CellOf(tr.DropoffLon, tr.DropoffLat)
			return traces.Route(from, to)
		}},
		// twitch's records are keyed by user; streamViewers' key is the stream.
		{q: traces.Twitch, measured: warm, key: func(r dataplane.Record) string {
			e, err := traces.ParseViewEvent(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			return e.Stream
		}},
	} {
		t.Run(tc.q, func(t *testing.T) {
			key := tc.key
			if key == nil {
				key = func(r dataplane.Record) string { return string(r.Key) }
			}
			seen := map[string]bool{}
			for i, r := range sequential(t, tc.q, warm, warm) {
				if k := key(r); seen[k] {
					t.Fatalf("warm-up record %d repeats key %q", i, k)
				} else {
					seen[k] = true
				}
			}
			for i, r := range generate(t, tc.q, tc.measured, 3, 5000) {
				if !seen[key(r)] {
					t.Fatalf("measurement record %d has key %q, which the warm-up of %d records did not touch", i, key(r), warm)
				}
			}
		})
	}
}

// In a warm-up run the list operators fill each key's window at its first
// record; outside one a key's first window holds only that record.
func TestWarmUpFillsWindows(t *testing.T) {
	recs := sequential(t, traces.Borg, 600, 600)
	for _, tc := range []struct {
		params map[string]string
		want   string // the window size in every output
	}{
		{params: map[string]string{control.ParamIsWarmUp: "true"}, want: fmt.Sprint(traces.BorgListSize)},
		{params: map[string]string{control.ParamIsWarmUp: "true", control.ParamListStateSize: "4"}, want: "4"},
		{params: nil, want: "1"},
	} {
		t.Run("window"+tc.want, func(t *testing.T) {
			res := run(t, traces.Borg, map[string]int{"jobEventStats": 2}, tc.params, recs)
			if len(res.Output) != len(recs) {
				t.Fatalf("params %v: %d outputs, want %d", tc.params, len(res.Output), len(recs))
			}
			for _, r := range res.Output {
				f := bytes.Split(r.Value, []byte(","))
				if len(f) < 2 || string(f[1]) != tc.want {
					t.Fatalf("params %v: output %q of key %q, want a window of %s events", tc.params, r.Value, r.Key, tc.want)
				}
			}
		})
	}
}

// Taxi routes stay distinct and on the grid past the first area's
// 160 000, which a GB warm-up (millions of routes) needs.
func TestTaxiRoutesDistinct(t *testing.T) {
	seen := map[string]int{}
	check := func(k int) {
		from, to := traces.TaxiRouteCells(k)
		for _, c := range []traces.Cell{from, to} {
			if c.X < 1 || c.X > traces.GridCells || c.Y < 1 || c.Y > traces.GridCells {
				t.Fatalf("route %d: cell %v off the %d×%d grid", k, c, traces.GridCells, traces.GridCells)
			}
		}
		r := traces.Route(from, to)
		if j, dup := seen[r]; dup {
			t.Fatalf("routes %d and %d are both %s", j, k, r)
		}
		seen[r] = k
	}
	for k := range 600_000 {
		check(k)
	}
	for k := traces.MaxTaxiRoutes - 50_000; k < traces.MaxTaxiRoutes; k++ {
		check(k)
	}
}
