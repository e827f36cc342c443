package nexmark_test

import (
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries/nexmark"
)

// closingStream generates events [from, from+n) of a closing-auction
// stream with event times from BaseTime.
func closingStream(t *testing.T, cfg nexmark.Config, from, n int64) []nexmark.Event {
	t.Helper()
	cfg.BaseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]nexmark.Event, 0, n)
	for i := from; i < from+n; i++ {
		var r dataplane.Record
		g.Next(i, &r)
		e, err := nexmark.Parse(r.Value)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		out = append(out, e)
	}
	return out
}

// A sequential closing-auction stream alternates auction k and a bid on it
// that wins it (price = reserve, inside the auction's lifetime), auction
// k's seller is FirstPersonID+k, and any range regenerates identically.
func TestClosingAuctionStreamSequential(t *testing.T) {
	cfg := nexmark.Config{Seed: 3, Sellers: nexmark.SellersSequential}
	evs := closingStream(t, cfg, 0, 2000)
	for i := 0; i < len(evs); i += 2 {
		a, b := evs[i].Auction, evs[i+1].Bid
		k := int64(i / 2)
		if a == nil || b == nil {
			t.Fatalf("events %d, %d are %+v, %+v; want an auction then a bid", i, i+1, evs[i], evs[i+1])
		}
		if a.ID != nexmark.FirstAuctionID+k || a.Seller != nexmark.FirstPersonID+k {
			t.Fatalf("auction %d: id %d seller %d, want id %d seller %d", k, a.ID, a.Seller, nexmark.FirstAuctionID+k, nexmark.FirstPersonID+k)
		}
		if b.Auction != a.ID || b.Price != a.Reserve || b.DateTime < a.DateTime || b.DateTime >= a.Expires {
			t.Fatalf("bid %+v does not win auction %+v", b, a)
		}
		if got := a.Expires - a.DateTime; got != nexmark.ClosingAuctionLength.Milliseconds() {
			t.Fatalf("auction %d open %d ms, want %d", k, got, nexmark.ClosingAuctionLength.Milliseconds())
		}
	}
	again := closingStream(t, cfg, 1000, 10)
	for i, e := range again {
		want := evs[1000+i]
		same := e.Auction != nil && want.Auction != nil && *e.Auction == *want.Auction ||
			e.Bid != nil && want.Bid != nil && *e.Bid == *want.Bid
		if !same {
			t.Fatalf("event %d regenerated as %+v, first generated as %+v", 1000+i, e, want)
		}
	}
	// OutputEventNumber resumes the same numbering.
	resumed := closingStream(t, nexmark.Config{Seed: 3, Sellers: nexmark.SellersSequential, OutputEventNumber: 1500}, 0, 4)
	if resumed[0].Auction == nil || resumed[0].Auction.ID != evs[1500].Auction.ID || resumed[1].Bid.Price != evs[1501].Bid.Price {
		t.Fatalf("resumed stream starts with %+v, want event 1500 %+v", resumed[0], evs[1500])
	}
}

// Uniform and Zipf sellers stay within NumActivePeople; Zipf concentrates
// them on the lowest indexes as its exponent grows.
func TestClosingAuctionStreamActiveSellers(t *testing.T) {
	const active, auctions = 1000, 20000
	hot := map[float64]float64{}
	for _, tc := range []struct {
		sellers string
		skew    float64
	}{{nexmark.SellersUniform, 0}, {nexmark.SellersZipf, 0.5}, {nexmark.SellersZipf, 1.5}} {
		evs := closingStream(t, nexmark.Config{Seed: 9, Sellers: tc.sellers, Skew: tc.skew, NumActivePeople: active}, 0, 2*auctions)
		distinct := map[int64]bool{}
		top := 0
		for i := 0; i < len(evs); i += 2 {
			s := evs[i].Auction.Seller - nexmark.FirstPersonID
			if s < 0 || s >= active {
				t.Fatalf("%s %v: seller index %d outside [0, %d)", tc.sellers, tc.skew, s, active)
			}
			distinct[s] = true
			if s < 10 {
				top++
			}
		}
		if tc.sellers == nexmark.SellersUniform && len(distinct) < active*99/100 {
			t.Fatalf("uniform: %d distinct sellers of %d", len(distinct), active)
		}
		hot[tc.skew] = float64(top) / auctions
	}
	// Uniform: 1 % of auctions go to the 10 lowest sellers.
	if !(hot[0] < 0.02 && hot[0.5] > hot[0] && hot[1.5] > 0.5) {
		t.Fatalf("share of the 10 lowest sellers by skew: %v", hot)
	}
}

// A produce request selects the closing-auction stream with its Nexmark
// Sellers, NumKeys (active sellers) and Skew; a bad mode or event-type
// selection is an error naming it.
func TestClosingAuctionStreamRequest(t *testing.T) {
	req := control.ProduceRequest{Generator: nexmark.GeneratorName, Seed: 1, NumKeys: 50, Skew: 1, Nexmark: &control.NexmarkSource{Sellers: nexmark.SellersZipf}}
	cfg := nexmark.ConfigOf(req)
	if cfg.Sellers != nexmark.SellersZipf || cfg.Skew != 1 || cfg.NumActivePeople != 50 {
		t.Fatalf("config %+v", cfg)
	}
	if _, err := produce.NewGenerator(req); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []nexmark.Config{{Sellers: "random"}, {Sellers: nexmark.SellersUniform, Kinds: []string{"Bid"}}} {
		if _, err := nexmark.NewGenerator(bad); err == nil {
			t.Fatalf("config %+v accepted", bad)
		}
	}
}
