package nexmark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"koala/dataplane"
)

// Closing auctions (q4, q6)
//
// The auction operator ("<q>-auctions") keys auctions and bids by auction
// id with compact binary values; the closing operator ("<q>-close") keeps,
// per auction, the auction and its best valid bid, and closes the auction
// when the watermark passes its expiry: the winning bid is the highest bid
// with price ≥ reserve and auction.dateTime ≤ bid.dateTime < auction.expires
// (ties: the lower bidder, so the result does not depend on arrival order).
// A closed auction with a winning bid is emitted once, keyed by what the
// next operator groups by (category for q4, seller for q6); one without is
// dropped.
//
// Bids may arrive before their auction (the generator names auctions a few
// ids ahead, and partitions interleave): they wait in list state "early".
// Once the watermark passes the end of an early bid's millisecond, any
// auction still to come is later than the bid, so the bid can never win
// and is dropped; a timer per key does that, so bids on auctions that
// never come do not pile up.
//
// Records at or behind the watermark on arrival are late: counted
// (Counters()["late_records"]) and dropped, like in the window operators.
//
// Timers (expiry, early-bid eviction) live in an in-memory index derived
// from state; the runtime rebuilds it through dataplane.StateTimers when
// keys move, so auctions that migrated close on their new owner.

// States of the closing operator.
const (
	AuctionState  = "auction" // encoded auction (auctionValue)
	BestBidState  = "best"    // best valid bid so far (bidValue)
	EarlyBidState = "early"   // list of bids seen before their auction
	tagAuction    = byte('A') // value tag of an auction record
	tagBid        = byte('B') // value tag of a bid record
	auctionLen    = 1 + 5*8   // tag, category, seller, reserve, dateTime, expires
	bidLen        = 1 + 3*8   // tag, price, bidder, dateTime
	msNanos       = int64(time.Millisecond)
)

// auctionValue is the compact auction the closing operator keeps.
type auctionValue struct {
	Category, Seller, Reserve, DateTime, Expires int64 // times in unix ms
}

func (a auctionValue) encode() []byte {
	v := make([]byte, auctionLen)
	v[0] = tagAuction
	for i, x := range []int64{a.Category, a.Seller, a.Reserve, a.DateTime, a.Expires} {
		binary.LittleEndian.PutUint64(v[1+8*i:], uint64(x))
	}
	return v
}

func decodeAuction(v []byte) (auctionValue, bool) {
	if len(v) != auctionLen || v[0] != tagAuction {
		return auctionValue{}, false
	}
	f := func(i int) int64 { return int64(binary.LittleEndian.Uint64(v[1+8*i:])) }
	return auctionValue{Category: f(0), Seller: f(1), Reserve: f(2), DateTime: f(3), Expires: f(4)}, true
}

// closeAt is the event time (ns) at which the auction closes: the last
// instant a valid bid can have.
func (a auctionValue) closeAt() int64 { return a.Expires*msNanos - 1 }

// bidValue is the compact bid the closing operator keeps.
type bidValue struct{ Price, Bidder, DateTime int64 }

func (b bidValue) encode() []byte {
	v := make([]byte, bidLen)
	v[0] = tagBid
	binary.LittleEndian.PutUint64(v[1:], uint64(b.Price))
	binary.LittleEndian.PutUint64(v[9:], uint64(b.Bidder))
	binary.LittleEndian.PutUint64(v[17:], uint64(b.DateTime))
	return v
}

func decodeBid(v []byte) (bidValue, bool) {
	if len(v) != bidLen || v[0] != tagBid {
		return bidValue{}, false
	}
	f := func(i int) int64 { return int64(binary.LittleEndian.Uint64(v[1+8*i:])) }
	return bidValue{Price: f(0), Bidder: f(1), DateTime: f(2)}, true
}

// evictAt is when an early bid can no longer win any auction still to come.
func (b bidValue) evictAt() int64 { return (b.DateTime + 1) * msNanos }

// wins says whether b is a valid bid on a that beats best (nil: none yet).
func (b bidValue) wins(a auctionValue, best *bidValue) bool {
	if b.Price < a.Reserve || b.DateTime < a.DateTime || b.DateTime >= a.Expires {
		return false
	}
	return best == nil || b.Price > best.Price || b.Price == best.Price && b.Bidder < best.Bidder
}

// auctionsAndBids keys auctions and bids by auction id.
func auctionsAndBids(e Event, r dataplane.Record, emit dataplane.Emit) {
	switch {
	case e.Auction != nil:
		a := e.Auction
		r.Key = itoa(a.ID)
		r.Value = auctionValue{Category: a.Category, Seller: a.Seller, Reserve: a.Reserve, DateTime: a.DateTime, Expires: a.Expires}.encode()
	case e.Bid != nil:
		r.Key = itoa(e.Bid.Auction)
		r.Value = bidValue{Price: e.Bid.Price, Bidder: e.Bid.Bidder, DateTime: e.Bid.DateTime}.encode()
	default:
		return
	}
	emit(r)
}

// Closed is a closed auction with its winning bid, as the closing operator
// emits it (value encoding: closedValue).
type Closed struct {
	Auction, Category, Seller, Price, Expires int64
}

const closedLen = 5 * 8

func (c Closed) encode() []byte {
	v := make([]byte, closedLen)
	for i, x := range []int64{c.Auction, c.Category, c.Seller, c.Price, c.Expires} {
		binary.LittleEndian.PutUint64(v[8*i:], uint64(x))
	}
	return v
}

// DecodeClosed reads a closing operator's output value.
func DecodeClosed(v []byte) (Closed, error) {
	if len(v) != closedLen {
		return Closed{}, fmt.Errorf("closed auction value of %d bytes, want %d", len(v), closedLen)
	}
	f := func(i int) int64 { return int64(binary.LittleEndian.Uint64(v[8*i:])) }
	return Closed{Auction: f(0), Category: f(1), Seller: f(2), Price: f(3), Expires: f(4)}, nil
}

// closer is the closing operator of one task.
type closer struct {
	dataplane.LateBound
	keyOf func(Closed) []byte
	log   *slog.Logger
	wm    int64
	index dataplane.TimerIndex
	due   [][]byte

	late, closed, noWinner, evicted, duplicate, bad atomic.Uint64
	lateTold                                        time.Time
}

func closerFactory(keyOf func(Closed) []byte) dataplane.OperatorFactory {
	return func(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
		log := ctx.Logger
		if log == nil {
			log = slog.Default()
		}
		return &closer{keyOf: keyOf, log: log, wm: dataplane.MinWatermark}, nil
	}
}

func (c *closer) StateNames() []string { return []string{AuctionState, BestBidState, EarlyBidState} }

func (c *closer) ProcessBatch([]dataplane.Record, dataplane.Emit) error {
	return errors.New("closing operator called without keyed state (its input must be keyed)")
}

func (c *closer) ProcessKeyed(in []dataplane.Record, st *dataplane.State, _ dataplane.Emit) error {
	for _, r := range in {
		if c.IsLate(r.EventTime, c.wm) {
			c.onLate(r)
			continue
		}
		if a, ok := decodeAuction(r.Value); ok {
			c.addAuction(r.Key, a, st)
			continue
		}
		b, ok := decodeBid(r.Value)
		if !ok {
			c.bad.Add(1) // the auction operator writes both kinds; nothing else reaches here
			continue
		}
		a, open := decodeAuction(st.Get(AuctionState, r.Key))
		if !open {
			st.AppendList(EarlyBidState, r.Key, r.Value)
			c.index.Add(b.evictAt(), r.Key)
			continue
		}
		c.offer(r.Key, a, b, st)
	}
	return nil
}

func (c *closer) addAuction(key []byte, a auctionValue, st *dataplane.State) {
	if st.Get(AuctionState, key) != nil {
		c.duplicate.Add(1) // auction ids are unique; keep the first
		return
	}
	st.Put(AuctionState, key, a.encode())
	for _, it := range st.GetList(EarlyBidState, key) {
		if b, ok := decodeBid(it); ok {
			c.offer(key, a, b, st)
		}
	}
	st.Delete(EarlyBidState, key)
	c.index.Add(a.closeAt(), key)
}

func (c *closer) offer(key []byte, a auctionValue, b bidValue, st *dataplane.State) {
	var best *bidValue
	if cur, ok := decodeBid(st.Get(BestBidState, key)); ok {
		best = &cur
	}
	if b.wins(a, best) {
		st.Put(BestBidState, key, b.encode())
	}
}

func (c *closer) onLate(r dataplane.Record) {
	n := c.late.Add(1)
	if now := time.Now(); now.Sub(c.lateTold) >= 10*time.Second {
		c.log.Warn("late records dropped by auction closing", "total", n, "event_time", r.EventTime, "watermark", c.wm)
		c.lateTold = now
	}
}

func (c *closer) DueKeys(wm int64) [][]byte {
	c.due = c.index.PopDue(wm)
	return c.due
}

// OnWatermark closes the due auctions and evicts early bids that can no
// longer win.
func (c *closer) OnWatermark(wm int64, st *dataplane.State, emit dataplane.Emit) error {
	c.wm = max(c.wm, wm)
	if st == nil {
		return nil
	}
	for _, key := range c.due {
		if a, ok := decodeAuction(st.Get(AuctionState, key)); ok && a.closeAt() <= wm {
			if b, ok := decodeBid(st.Get(BestBidState, key)); ok {
				id, err := parseID(key)
				if err != nil {
					return fmt.Errorf("closing auction %q: %w", key, err)
				}
				out := Closed{Auction: id, Category: a.Category, Seller: a.Seller, Price: b.Price, Expires: a.Expires}
				emit(dataplane.Record{Key: c.keyOf(out), Value: out.encode(), EventTime: a.closeAt(), Offset: -1, Partition: -1})
				c.closed.Add(1)
			} else {
				c.noWinner.Add(1)
			}
			st.Delete(AuctionState, key)
			st.Delete(BestBidState, key)
		}
		early := st.GetList(EarlyBidState, key)
		keep := early[:0:0]
		for _, it := range early {
			if b, ok := decodeBid(it); ok && b.evictAt() > wm {
				keep = append(keep, it)
			}
		}
		if len(keep) != len(early) {
			c.evicted.Add(uint64(len(early) - len(keep)))
			st.SetList(EarlyBidState, key, keep)
		}
	}
	c.due = nil
	return nil
}

func parseID(key []byte) (int64, error) { return strconv.ParseInt(string(key), 10, 64) }

func (c *closer) TimerStates() []string { return []string{AuctionState, EarlyBidState} }
func (c *closer) ResetTimers()          { c.index.Reset() }

// Timers makes the closer a dataplane.TimerIndexOwner: its timers move
// with their keys on a rescale, so the new owner indexes the gained
// auctions without scanning their state.
func (c *closer) Timers() *dataplane.TimerIndex { return &c.index }

func (c *closer) IndexTimers(state string, key, value []byte) {
	switch state {
	case AuctionState:
		if a, ok := decodeAuction(value); ok {
			c.index.Add(a.closeAt(), key)
		}
	case EarlyBidState:
		items, _ := dataplane.DecodeList(value)
		for _, it := range items {
			if b, ok := decodeBid(it); ok {
				c.index.Add(b.evictAt(), key)
			}
		}
	}
}

func (c *closer) Counters() map[string]uint64 {
	return map[string]uint64{
		"late_records": c.late.Load(), "auctions_closed": c.closed.Load(), "auctions_without_winner": c.noWinner.Load(),
		"early_bids_evicted": c.evicted.Load(), "duplicate_auctions": c.duplicate.Load(), "bad_records": c.bad.Load(),
	}
}
