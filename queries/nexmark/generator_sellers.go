package nexmark

import (
	"fmt"
	"math/rand/v2"
	"time"

	"koala/dataplane/produce"
)

// Closing-auction streams (q6* state experiments)
//
// The reference stream sends most auctions to one hot seller and closes
// few of them with a winner, so it cannot build q6*'s per-seller state key
// by key, nor aim the later load at a chosen set of sellers. With
// Config.Sellers set, the generator makes a stream in which every auction
// closes with a winner: event 2k is auction k (id FirstAuctionID+k, open
// for ClosingAuctionLength) and event 2k+1 a bid on it at its reserve
// price, so one closed auction per two events reaches q6*'s per-seller
// average. Auction k's seller (FirstPersonID + index) is:
//
//   - SellersSequential: index k, one new seller per auction (the warm-up
//     key stream: N events build the state of N/2 sellers);
//   - SellersUniform: uniform over NumActivePeople sellers;
//   - SellersZipf: Zipf(Skew) over NumActivePeople sellers (index 0 the
//     hottest).
//
// Like the reference stream, event e depends only on the config and e.
const (
	SellersSequential = "sequential"
	SellersUniform    = "uniform"
	SellersZipf       = "zipf"

	// ClosingAuctionLength is how long an auction of a closing-auction
	// stream stays open: short, so that the state of a warm-up is complete
	// a moment after its last event.
	ClosingAuctionLength = time.Second
)

// sellerPicker draws auction k's seller index.
type sellerPicker func(k int64) int64

func newSellerPicker(cfg Config) (sellerPicker, error) {
	switch cfg.Sellers {
	case SellersSequential:
		return func(k int64) int64 { return k }, nil
	case SellersUniform:
		n := int64(cfg.NumActivePeople)
		seed := uint64(cfg.Seed)
		return func(k int64) int64 {
			return rand.New(rand.NewPCG(seed, uint64(k)^0x5e11e5)).Int64N(n)
		}, nil
	case SellersZipf:
		z, err := produce.NewZipfKeys(cfg.NumActivePeople, cfg.Skew)
		if err != nil {
			return nil, fmt.Errorf("nexmark sellers %q over NumActivePeople %d: %w", SellersZipf, cfg.NumActivePeople, err)
		}
		seed := cfg.Seed
		return func(k int64) int64 { return int64(z.Index(seed, k)) }, nil
	}
	return nil, fmt.Errorf("nexmark sellers %q: allowed are %q, %q, %q (or empty for the reference stream)", cfg.Sellers, SellersSequential, SellersUniform, SellersZipf)
}

// closingEvent builds event e of a closing-auction stream at event time
// ts (unix ns).
func (g *Generator) closingEvent(e, ts int64) Event {
	k := e / 2
	// Auction k's reserve is drawn from k alone, so its bid can meet it.
	rng := rand.New(rand.NewPCG(uint64(g.cfg.Seed), uint64(2*k)))
	initial := nextPrice(rng)
	reserve := initial + nextPrice(rng)
	ms := ts / int64(time.Millisecond)
	if e%2 == 0 {
		a := &Auction{
			ID: FirstAuctionID + k, ItemName: randString(rng, 20), Description: randString(rng, 100),
			InitialBid: initial, Reserve: reserve, DateTime: ms,
			Expires: ms + g.cfg.AuctionLength.Milliseconds(), Seller: FirstPersonID + g.seller(k),
			Category: FirstCategoryID + int64(rng.IntN(NumCategories)),
		}
		a.Extra = pad(rng, g.cfg.AvgAuctionBytes, Event{Auction: a})
		return Event{Auction: a}
	}
	b := &Bid{
		Auction: FirstAuctionID + k, Bidder: FirstPersonID + rng.Int64N(int64(g.cfg.NumActivePeople)), Price: reserve,
		Channel: channels[rng.IntN(len(channels))], URL: "n.io/" + randString(rng, 4), DateTime: ms,
	}
	b.Extra = pad(rng, g.cfg.AvgBidBytes, Event{Bid: b})
	return Event{Bid: b}
}
