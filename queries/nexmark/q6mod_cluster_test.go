package nexmark_test

import (
	"fmt"
	"strconv"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries"
	"koala/queries/nexmark"
	"koala/workflows/wftest"
)

// q6ModConfig is the closed-auction stream of the q6 modified runs: the
// artifact's hot-seller draw over a few hundred sellers, so every seller
// gets many closed auctions and the ring of ten wraps.
var q6ModConfig = nexmark.Config{Seed: 11, NumActivePeople: 100, HotSellerRatio: 0.25, HotSellerRange: 100}

// q6ModInput is the first n closed auctions of q6ModConfig.
func q6ModInput(t *testing.T, n int64) ([]dataplane.Record, []nexmark.ClosedAuction) {
	t.Helper()
	return closedAuctions(t, q6ModConfig, 0, n)
}

// q6ModOracle is q6 modified's output per seller (its key), in input
// order, computed from the closed auctions alone: after each closed
// auction, the mean of the seller's last ten prices so far. It keeps every
// price instead of the query's ring, so it shares no logic with it.
func q6ModOracle(in []nexmark.ClosedAuction) map[string][]nexmark.Q6ModResult {
	prices := map[int64][]int64{}
	want := map[string][]nexmark.Q6ModResult{}
	for _, c := range in {
		ps := append(prices[c.Seller], c.Price)
		prices[c.Seller] = ps
		last := ps[max(0, len(ps)-10):]
		var sum int64
		for _, p := range last {
			sum += p
		}
		key := strconv.FormatInt(c.Seller, 10)
		want[key] = append(want[key], nexmark.Q6ModResult{Seller: c.Seller, Average: float64(sum) / float64(len(last))})
	}
	return want
}

// checkQ6Mod compares the output with the oracle, seller by seller and in
// order: one output per closed auction, each seller's in the order of its
// closed auctions.
func checkQ6Mod(t *testing.T, out []dataplane.Record, in []nexmark.ClosedAuction) {
	t.Helper()
	want := q6ModOracle(in)
	got := map[string][]nexmark.Q6ModResult{}
	for _, r := range out {
		res, err := nexmark.DecodeQ6ModResult(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		got[string(r.Key)] = append(got[string(r.Key)], res)
	}
	if len(got) != len(want) {
		t.Errorf("output for %d sellers, want %d", len(got), len(want))
	}
	for seller, w := range want {
		g := got[seller]
		if len(g) != len(w) {
			t.Errorf("seller %s: %d outputs, want %d", seller, len(g), len(w))
			continue
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("seller %s output %d: %+v, want %+v", seller, i, g[i], w[i])
				break
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// registerQ6ModRecords registers q6 modified ending in a record sink (once)
// and returns its name; the sink ledger judges it like the registered
// query.
func registerQ6ModRecords(t testing.TB) string {
	t.Helper()
	name := nexmark.ArtifactQ6Mod + "-records"
	if _, dup := registered.LoadOrStore(name, true); !dup {
		if err := queries.Register(queries.Query{Name: name, Operators: nexmark.BuildQ6Mod(name, nexmark.RecordSink).MustBuild(),
			Unchecked: queries.Unchecked(nexmark.ArtifactQ6Mod), Unordered: queries.Unordered(nexmark.ArtifactQ6Mod)}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// TestQ6ModRegistered: q6 modified is registered under the artifact's
// name and the short one, with the artifact's operators, its mapper keyed
// and stateful, and the sink ledger checking its exactness and per-key
// order (one output per input, keyed by seller like the input).
func TestQ6ModRegistered(t *testing.T) {
	for _, name := range []string{nexmark.ArtifactQ6Mod, nexmark.Q6Mod} {
		ops, err := queries.Operators(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, op := range ops {
			names = append(names, op.Name)
		}
		if fmt.Sprint(names) != "[source statefulMapper sink]" {
			t.Errorf("%s operators %v, want [source statefulMapper sink]", name, names)
		}
		if !ops[1].Stateful || !ops[1].Keyed {
			t.Errorf("%s statefulMapper: stateful %v keyed %v", name, ops[1].Stateful, ops[1].Keyed)
		}
		if why := queries.Unordered(name); why != "" {
			t.Errorf("%s: the ledger does not check it: %s", name, why)
		}
	}
}

// TestQ6Mod runs q6 modified on generated closed auctions with bad records
// mixed in: the output is the oracle's, and each bad record is counted and
// dead-lettered once, never fatal.
func TestQ6Mod(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	good, evs := q6ModInput(t, 3000)
	otherSeller, err := nexmark.EncodeEvent(nexmark.Event{ClosedAuction: &nexmark.ClosedAuction{ID: 1000, Seller: 1001, Price: 5, Category: 10, DateTime: 1}})
	if err != nil {
		t.Fatal(err)
	}
	bad := []dataplane.Record{
		{Key: []byte("1001"), Value: []byte(`{"bid":{"auction":1000,"bidder":1001,"price":5,"dateTime":1}}`)},                    // not a closed auction
		{Key: []byte("1002"), Value: []byte(`{"closedAuction":{"id":1000,"seller":1001,"price":5,"category":10,"dateTime":1}}`)}, // keyed by another seller
		{Key: []byte("1003"), Value: otherSeller}, // the same, binary
	}
	for _, m := range malformed {
		bad = append(bad, dataplane.Record{Key: []byte("1001"), Value: m})
	}
	var in []dataplane.Record
	for i, r := range good {
		in = append(in, r)
		if i%200 == 100 && len(bad) > 0 {
			in, bad = append(in, bad[0]), bad[1:]
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d bad records left unmixed", len(bad))
	}
	res := wftest.RunQuery(t, wftest.Options{Query: registerQ6ModRecords(t), Backend: "pebble",
		Parallelism: map[string]int{"statefulMapper": 2}, Params: map[string]string{control.ParamDummyFieldSize: "100"},
		Phases: []wftest.Phase{{Records: in}}})
	want := uint64(len(malformed) + 3)
	if got := res.Counter("", "malformed_records"); got != want {
		t.Errorf("malformed records counted %d, want %d", got, want)
	}
	if got := res.Counter("", "deadletter_malformed"); got != want {
		t.Errorf("dead-letter path saw %d records, want %d", got, want)
	}
	if n, k := res.Counter("", "not_closed_auctions"), res.Counter("", "key_not_seller"); n != 1 || k != 2 {
		t.Errorf("not_closed_auctions %d, key_not_seller %d; want 1 and 2", n, k)
	}
	checkQ6Mod(t, res.Output, evs)
}
