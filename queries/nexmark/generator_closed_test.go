package nexmark_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries/nexmark"
)

// closedKinds selects the closed-auction stream.
var closedKinds = []string{"ClosedAuction"}

// closedAuctions generates records [from, from+n) of the closed-auction
// stream of cfg and their decoded events.
func closedAuctions(t *testing.T, cfg nexmark.Config, from, n int64) ([]dataplane.Record, []nexmark.ClosedAuction) {
	t.Helper()
	cfg.Kinds = closedKinds
	g := mustGenerator(cfg)
	recs := make([]dataplane.Record, n)
	evs := make([]nexmark.ClosedAuction, n)
	for i := range n {
		g.Next(from+i, &recs[i])
		e, err := nexmark.Parse(recs[i].Value)
		if err != nil {
			t.Fatalf("closed auction %d: %v", from+i, err)
		}
		if e.ClosedAuction == nil {
			t.Fatalf("closed auction %d is a %s event", from+i, e.Kind())
		}
		evs[i] = *e.ClosedAuction
	}
	return recs, evs
}

// The closed-auction stream is a function of the seed and the position:
// the same twice, resumable at OutputEventNumber, different for another
// seed; every record is keyed by its seller and carries exactly
// ExtraPayloadSize bytes of padding.
func TestClosedAuctionStreamDeterministic(t *testing.T) {
	cfg := nexmark.Config{Seed: 5, NumActivePeople: 50, HotSellerRatio: 0.25, ExtraPayloadSize: 33}
	recs, evs := closedAuctions(t, cfg, 0, 3000)
	again, _ := closedAuctions(t, cfg, 0, 3000)
	for i := range recs {
		if string(recs[i].Key) != string(again[i].Key) || string(recs[i].Value) != string(again[i].Value) || recs[i].EventTime != again[i].EventTime {
			t.Fatalf("closed auction %d differs between two generators of one config", i)
		}
		e := evs[i]
		if string(recs[i].Key) != strconv.FormatInt(e.Seller, 10) {
			t.Fatalf("closed auction %d keyed %q, want its seller %d", i, recs[i].Key, e.Seller)
		}
		if e.ID != nexmark.FirstAuctionID+int64(i) || len(e.Extra) != 33 || e.Price <= 0 ||
			e.Category < nexmark.FirstCategoryID || e.Category >= nexmark.FirstCategoryID+nexmark.NumCategories {
			t.Fatalf("closed auction %d: %+v", i, e)
		}
	}
	resumed := cfg
	resumed.OutputEventNumber = 1200
	tail, _ := closedAuctions(t, resumed, 0, 100)
	for i, r := range tail {
		if string(r.Value) != string(recs[1200+i].Value) {
			t.Fatalf("OutputEventNumber 1200: record %d is not closed auction %d", i, 1200+i)
		}
	}
	other := cfg
	other.Seed = 6
	_, otherEvs := closedAuctions(t, other, 0, 100)
	same := 0
	for i := range otherEvs {
		if otherEvs[i].Price == evs[i].Price && otherEvs[i].Seller == evs[i].Seller {
			same++
		}
	}
	if same > 20 {
		t.Errorf("seeds 5 and 6 agree on %d of 100 closed auctions", same)
	}
}

// The sellers follow the artifact's draw: HotSellerRatio of the closed
// auctions go to the hot seller of the moment (the newest person rounded
// down to a multiple of HotSellerRange), the rest to the NumActivePeople+1
// newest people, one new person every 46 closed auctions.
func TestClosedAuctionSellers(t *testing.T) {
	const from, n = 46_000, 4600 // people 1000 … 1100 are the newest
	newest := func(k int64) int64 { return k / nexmark.BidProportion }
	share := func(ratio float64) (hot float64, distinct int) {
		_, evs := closedAuctions(t, nexmark.Config{Seed: 9, NumActivePeople: 200, HotSellerRatio: ratio, HotSellerRange: 50}, from, n)
		seen := map[int64]bool{}
		hits := 0
		for i, e := range evs {
			k := from + int64(i)
			p, s := newest(k), e.Seller-nexmark.FirstPersonID
			if s > p || s < p-200 {
				t.Fatalf("ratio %v: closed auction %d sold by person %d, outside the active people [%d, %d]", ratio, k, s, p-200, p)
			}
			if s == p/50*50 {
				hits++
			}
			seen[s] = true
		}
		return float64(hits) / n, len(seen)
	}
	if hot, distinct := share(1); hot != 1 || distinct > 3 {
		t.Errorf("HotSellerRatio 1: %.2f of the closed auctions by the hot seller over %d sellers, want all, ≤ 3 sellers", hot, distinct)
	}
	if hot, distinct := share(0); hot > 0.05 || distinct < 250 {
		t.Errorf("HotSellerRatio 0: %.2f by the hot seller over %d sellers, want a uniform share over ~300", hot, distinct)
	}
	if hot, _ := share(0.25); math.Abs(hot-0.25) > 0.04 {
		t.Errorf("HotSellerRatio 0.25: %.2f of the closed auctions by the hot seller", hot)
	}
	// Sequential sellers (the warm-up): closed auction k is seller k's.
	_, evs := closedAuctions(t, nexmark.Config{Seed: 9, Sellers: nexmark.SellersSequential}, 500, 100)
	for i, e := range evs {
		if want := nexmark.FirstPersonID + 500 + int64(i); e.Seller != want {
			t.Fatalf("sequential closed auction %d sold by %d, want %d", 500+i, e.Seller, want)
		}
	}
}

// Knobs out of range, and closed-auction knobs on another stream, are
// errors naming the knob and what is allowed.
func TestClosedAuctionKnobs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     nexmark.Config
		wantErr []string // all in the error; none: accepted
	}{
		{name: "defaults", cfg: nexmark.Config{Kinds: closedKinds}},
		{name: "artifact config", cfg: nexmark.Config{Kinds: []string{"closedauction"}, NumActivePeople: 1000, HotSellerRatio: 0.25, HotSellerRange: 100}},
		{name: "ratio 1", cfg: nexmark.Config{Kinds: closedKinds, HotSellerRatio: 1}},
		{name: "largest pad", cfg: nexmark.Config{Kinds: closedKinds, ExtraPayloadSize: nexmark.MaxExtraPayloadSize}},
		{name: "zipf sellers", cfg: nexmark.Config{Kinds: closedKinds, Sellers: nexmark.SellersZipf, Skew: 1}},
		{name: "ratio above 1", cfg: nexmark.Config{Kinds: closedKinds, HotSellerRatio: 1.5}, wantErr: []string{"HotSellerRatio 1.5", "between 0 and 1"}},
		{name: "negative ratio", cfg: nexmark.Config{Kinds: closedKinds, HotSellerRatio: -0.1}, wantErr: []string{"HotSellerRatio -0.1", "between 0 and 1"}},
		{name: "NaN ratio", cfg: nexmark.Config{Kinds: closedKinds, HotSellerRatio: math.NaN()}, wantErr: []string{"HotSellerRatio NaN"}},
		{name: "negative range", cfg: nexmark.Config{Kinds: closedKinds, HotSellerRange: -3}, wantErr: []string{"HotSellerRange -3", "≥ 1"}},
		{name: "negative pad", cfg: nexmark.Config{Kinds: closedKinds, ExtraPayloadSize: -1}, wantErr: []string{"ExtraPayloadSize -1", "between 0 and 524288"}},
		{name: "pad too large", cfg: nexmark.Config{Kinds: closedKinds, ExtraPayloadSize: nexmark.MaxExtraPayloadSize + 1}, wantErr: []string{"ExtraPayloadSize 524289"}},
		{name: "negative people", cfg: nexmark.Config{Kinds: closedKinds, NumActivePeople: -1}, wantErr: []string{"NumActivePeople -1", "≥ 1"}},
		{name: "mixed kinds", cfg: nexmark.Config{Kinds: []string{"Bid", "ClosedAuction"}}, wantErr: []string{"ClosedAuction", "cannot be mixed"}},
		{name: "ratio and sellers mode", cfg: nexmark.Config{Kinds: closedKinds, HotSellerRatio: 0.5, Sellers: nexmark.SellersUniform}, wantErr: []string{"HotSellerRatio 0.5", `"uniform"`}},
		{name: "bad sellers mode", cfg: nexmark.Config{Kinds: closedKinds, Sellers: "random"}, wantErr: []string{`"random"`, "sequential"}},
		{name: "ratio on the reference stream", cfg: nexmark.Config{HotSellerRatio: 0.25}, wantErr: []string{"HotSellerRatio 0.25", "ClosedAuction stream only"}},
		{name: "pad on bids", cfg: nexmark.Config{Kinds: []string{"Bid"}, ExtraPayloadSize: 10, HotSellerRange: 7}, wantErr: []string{"HotSellerRange 7", "ExtraPayloadSize 10", "ClosedAuction stream only"}},
		{name: "unknown kind", cfg: nexmark.Config{Kinds: []string{"Closed"}}, wantErr: []string{`"Closed"`, "ClosedAuction"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nexmark.NewGenerator(tc.cfg)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A produce request's Nexmark source config reaches the closed-auction
// stream: event type, hot sellers and padding.
func TestClosedAuctionRequest(t *testing.T) {
	req := control.ProduceRequest{Generator: nexmark.GeneratorName, Seed: 3, Nexmark: &control.NexmarkSource{
		EventTypes: []string{"ClosedAuction"}, NumActivePeople: 1000, HotSellerRatio: 1, HotSellerRange: 100, ExtraPayloadSize: 12,
	}}
	g, err := produce.NewGenerator(req)
	if err != nil {
		t.Fatal(err)
	}
	for n := range int64(500) {
		var r dataplane.Record
		g.Next(n, &r)
		e, err := nexmark.Parse(r.Value)
		if err != nil || e.ClosedAuction == nil {
			t.Fatalf("record %d: %s (%v)", n, r.Value, err)
		}
		if c := e.ClosedAuction; c.Seller != nexmark.FirstPersonID || len(c.Extra) != 12 {
			t.Fatalf("record %d: seller %d, %d bytes of padding; want the hot seller %d and 12 bytes", n, c.Seller, len(c.Extra), nexmark.FirstPersonID)
		}
	}
	req.Nexmark.HotSellerRatio = 2
	if _, err := produce.NewGenerator(req); err == nil || !strings.Contains(err.Error(), "HotSellerRatio 2") {
		t.Fatalf("HotSellerRatio 2: error %v", err)
	}
}
