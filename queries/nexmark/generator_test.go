package nexmark_test

import (
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries/nexmark"
)

func produced(t *testing.T, req control.ProduceRequest, n int) []nexmark.Event {
	t.Helper()
	req.Generator = nexmark.GeneratorName
	g, err := produce.NewGenerator(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]nexmark.Event, n)
	for i := range out {
		var r dataplane.Record
		g.Next(int64(i), &r)
		e, err := nexmark.Parse(r.Value)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		out[i] = e
	}
	return out
}

// TestGeneratorKnobs checks that the produce request's Nexmark source
// config reaches the generator.
func TestGeneratorKnobs(t *testing.T) {
	all := produced(t, control.ProduceRequest{Seed: 7}, 5000)
	var allBids []nexmark.Event
	for _, e := range all {
		if e.Bid != nil {
			allBids = append(allBids, e)
		}
	}
	bids := produced(t, control.ProduceRequest{Seed: 7, Nexmark: &control.NexmarkSource{EventTypes: []string{"Bid"}}}, 2000)
	for i, e := range bids {
		if e.Bid == nil || e.Bid.Auction != allBids[i].Bid.Auction || e.Bid.Price != allBids[i].Bid.Price {
			t.Fatalf("bid-only stream event %d is %+v, want the %d-th bid of the full stream %+v", i, e, i, allBids[i].Bid)
		}
	}
	resumed := produced(t, control.ProduceRequest{Seed: 7, Nexmark: &control.NexmarkSource{EventTypes: []string{"bid"}, OutputEventNumber: 1500}}, 500)
	for i, e := range resumed {
		a, b := *e.Bid, *bids[1500+i].Bid
		a.DateTime, b.DateTime = 0, 0 // wall clock: no BaseTime in a produce request
		if a != b {
			t.Fatalf("resumed bid %d differs from bid %d of the stream", i, 1500+i)
		}
	}
	people := produced(t, control.ProduceRequest{Seed: 7, Nexmark: &control.NexmarkSource{EventTypes: []string{"Person", "Auction"}}}, 400)
	for i, e := range people {
		if e.Bid != nil {
			t.Fatalf("event %d of a Person+Auction stream is a bid", i)
		}
	}

	count := func(evs []nexmark.Event, of func(nexmark.Event) (int64, bool)) map[int64]int {
		m := map[int64]int{}
		for _, e := range evs {
			if v, ok := of(e); ok {
				m[v]++
			}
		}
		return m
	}
	auctionOf := func(e nexmark.Event) (int64, bool) {
		if e.Bid == nil {
			return 0, false
		}
		return e.Bid.Auction, true
	}
	bidderOf := func(e nexmark.Event) (int64, bool) {
		if e.Bid == nil {
			return 0, false
		}
		return e.Bid.Bidder, true
	}
	top := func(m map[int64]int) int {
		n := 0
		for _, c := range m {
			n = max(n, c)
		}
		return n
	}
	hot := produced(t, control.ProduceRequest{Seed: 7, Nexmark: &control.NexmarkSource{EventTypes: []string{"Bid"}, HotAuctionsRatio: 100, HotBiddersRatio: 100}}, 4000)
	cold := produced(t, control.ProduceRequest{Seed: 7, Nexmark: &control.NexmarkSource{EventTypes: []string{"Bid"}, HotAuctionsRatio: 1, HotBiddersRatio: 1}}, 4000)
	if h, c := top(count(hot, auctionOf)), top(count(cold, auctionOf)); h < 5*c {
		t.Errorf("busiest auction: %d bids with hot ratio 100, %d with 1: the ratio is not applied", h, c)
	}
	if h, c := top(count(hot, bidderOf)), top(count(cold, bidderOf)); h < 5*c {
		t.Errorf("busiest bidder: %d bids with hot ratio 100, %d with 1: the ratio is not applied", h, c)
	}
	// Far into the stream (4 000+ people exist), cold bidders come from the
	// NumActivePeople most recent people.
	activeBidders := func(n int) int {
		evs := produced(t, control.ProduceRequest{Seed: 7, NumKeys: 100000, Nexmark: &control.NexmarkSource{EventTypes: []string{"Bid"}, NumActivePeople: n, HotBiddersRatio: 1, OutputEventNumber: 200000}}, 4000)
		return len(count(evs, bidderOf))
	}
	if few, many := activeBidders(20), activeBidders(1000); few > 150 || many < 500 {
		t.Errorf("distinct bidders: %d with NumActivePeople 20, %d with 1000", few, many)
	}
	sellers := produced(t, control.ProduceRequest{Seed: 7, Nexmark: &control.NexmarkSource{EventTypes: []string{"Auction"}, HotSellersRatio: 100}}, 2000)
	if n := len(count(sellers, func(e nexmark.Event) (int64, bool) { return e.Auction.Seller, true })); n > 100 {
		t.Errorf("%d distinct sellers with hot seller ratio 100", n)
	}

	_, err := produce.NewGenerator(control.ProduceRequest{Generator: nexmark.GeneratorName, Nexmark: &control.NexmarkSource{EventTypes: []string{"Bids"}}})
	if err == nil || !strings.Contains(err.Error(), `"Bids"`) || !strings.Contains(err.Error(), "Person, Auction, Bid") {
		t.Fatalf("unknown event type: error %v, want one naming it and the allowed types", err)
	}
}
