package nexmark

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// Closed-auction stream (input of nexmark_query6_modified)
//
// The artifact's query6Mod does not close auctions itself: its producers
// write closed auctions (id, seller, winning price, category, time, pad) to
// a topic of their own, and the query reads them straight into a keyed
// stateful mapper. Kinds ["ClosedAuction"] makes that stream: Next(n) is
// closed auction k = OutputEventNumber+n, with id FirstAuctionID+k, a
// winning price and a category drawn like the reference stream's, event
// time BaseTime + k·InterEventNanos, ExtraPayloadSize bytes of padding, and
// the record keyed by its seller (the query's key). The seller is:
//
//   - with Sellers set, that mode's draw for k (SellersSequential is the
//     artifact's warm-up: one new seller per closed auction, so N events
//     build the state of N sellers; uniform and zipf spread over
//     NumActivePeople);
//   - otherwise the artifact's draw. The newest person is p = k /
//     closedAuctionsPerPerson: the artifact numbers closed auctions like
//     the bids of the 1:3:46 mix, so one person joins every 46 closed
//     auctions and the sellers in use slide with the stream. With
//     probability HotSellerRatio the seller is the hot one of the moment, p
//     rounded down to a multiple of HotSellerRange; otherwise it is uniform
//     over the NumActivePeople+1 newest people.
//
// Event k depends only on the config and k, so an oracle can regenerate
// any range and parallel producers can split one sequence.

// KindClosedAuction is the closed-auction kind (Event.Kind, Config.Kinds;
// matched without case, so the artifact's "ClosedAuction" selects it).
const KindClosedAuction = "closedauction"

// Closed-auction stream knobs.
const (
	// DefaultHotSellerRange is HotSellerRange when unset (the value of
	// every artifact query6Mod config).
	DefaultHotSellerRange = 100
	// MaxExtraPayloadSize bounds a record's padding well below the largest
	// record the workers accept (kafkaio.DefaultMaxRecordBytes, 1 MiB), so
	// padded records are not rejected as oversize.
	MaxExtraPayloadSize = 512 << 10
	// closedAuctionsPerPerson is how many closed auctions pass per new
	// person (the bids per 50 events of the reference mix).
	closedAuctionsPerPerson = BidProportion
	// extraSalt seeds the padding's letters apart from the events' draws.
	extraSalt = 0xe87a
)

// allowedKinds is what Config.Kinds accepts, for error messages.
const allowedKinds = "Person, Auction, Bid, or ClosedAuction alone"

// closedAuctionsOnly says whether cfg selects the closed-auction stream;
// mixing it with other kinds is an error, since it is a stream of its own
// (the artifact writes it to its own topic).
func closedAuctionsOnly(cfg Config) (bool, error) {
	for _, k := range cfg.Kinds {
		if strings.ToLower(k) == KindClosedAuction {
			if len(cfg.Kinds) > 1 {
				return false, fmt.Errorf("nexmark event types %v: ClosedAuction is a stream of its own and cannot be mixed with other event types", cfg.Kinds)
			}
			return true, nil
		}
	}
	return false, nil
}

// rejectClosedAuctionKnobs refuses the closed-auction knobs on another
// stream, where they would be silently ignored.
func rejectClosedAuctionKnobs(cfg Config) error {
	var set []string
	if cfg.HotSellerRatio != 0 {
		set = append(set, fmt.Sprintf("HotSellerRatio %v", cfg.HotSellerRatio))
	}
	if cfg.HotSellerRange != 0 {
		set = append(set, fmt.Sprintf("HotSellerRange %d", cfg.HotSellerRange))
	}
	if cfg.ExtraPayloadSize != 0 {
		set = append(set, fmt.Sprintf("ExtraPayloadSize %d", cfg.ExtraPayloadSize))
	}
	if len(set) > 0 {
		return fmt.Errorf("nexmark %s: shapes the ClosedAuction stream only (event types ClosedAuction); the reference stream's hot sellers are HotSellersRatio (1 in N)", strings.Join(set, ", "))
	}
	return nil
}

// initClosedAuctions checks cfg's closed-auction knobs (as given, before
// defaults) and makes g generate the closed-auction stream.
func (g *Generator) initClosedAuctions(cfg Config) error {
	switch {
	case math.IsNaN(cfg.HotSellerRatio) || cfg.HotSellerRatio < 0 || cfg.HotSellerRatio > 1:
		return fmt.Errorf("nexmark HotSellerRatio %v: must be between 0 and 1 (the share of closed auctions sold by the hot seller)", cfg.HotSellerRatio)
	case cfg.HotSellerRange < 0:
		return fmt.Errorf("nexmark HotSellerRange %d: must be ≥ 1 (people per hot seller), or 0 for %d", cfg.HotSellerRange, DefaultHotSellerRange)
	case cfg.ExtraPayloadSize < 0 || cfg.ExtraPayloadSize > MaxExtraPayloadSize:
		return fmt.Errorf("nexmark ExtraPayloadSize %d: must be between 0 and %d bytes", cfg.ExtraPayloadSize, MaxExtraPayloadSize)
	case cfg.NumActivePeople < 0:
		return fmt.Errorf("nexmark NumActivePeople %d: must be ≥ 1, or 0 for %d", cfg.NumActivePeople, DefaultConfig().NumActivePeople)
	case cfg.Sellers != "" && cfg.HotSellerRatio != 0:
		return fmt.Errorf("nexmark HotSellerRatio %v with sellers %q: the mode draws every seller, so the hot-seller draw would be ignored; set one of them", cfg.HotSellerRatio, cfg.Sellers)
	}
	if cfg.Sellers != "" {
		var err error
		if g.seller, err = newSellerPicker(g.cfg); err != nil {
			return err
		}
	}
	g.closed = true
	// One pad for every record: the artifact pads with a constant too, and
	// drawing it per record would cost more than the rest of the event.
	g.extra = randString(rand.New(rand.NewPCG(uint64(g.cfg.Seed), extraSalt)), g.cfg.ExtraPayloadSize)
	return nil
}

// closedAuction builds closed auction k at event time ts (unix ns).
func (g *Generator) closedAuction(k, ts int64) *ClosedAuction {
	rng := rand.New(rand.NewPCG(uint64(g.cfg.Seed), uint64(k)))
	// Drawn for every k, so the later draws of k do not depend on the mode.
	hot := rng.Float64() < g.cfg.HotSellerRatio
	var seller int64
	switch p := k / closedAuctionsPerPerson; {
	case g.seller != nil:
		seller = g.seller(k)
	case hot:
		r := int64(g.cfg.HotSellerRange)
		seller = p / r * r
	default:
		lo := max(p-int64(g.cfg.NumActivePeople), 0)
		seller = lo + rng.Int64N(p-lo+1)
	}
	return &ClosedAuction{
		ID: FirstAuctionID + k, Seller: FirstPersonID + seller,
		Category: FirstCategoryID + rng.Int64N(NumCategories), Price: nextPrice(rng),
		DateTime: ts / int64(time.Millisecond), Extra: g.extra,
	}
}
