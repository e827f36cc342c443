package nexmark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"koala/dataplane"
	"koala/dataplane/control"
)

// Q6 is the large-state variant of Nexmark q6 ("query6Mod"): per seller,
// the prices of the seller's last Q6Keep closed auctions, each kept with a
// pad of DummyFieldSize bytes (job parameter "DummyFieldSize", default 0),
// and the average of those prices emitted after every closed auction. The
// pad makes the per-key state as large as an experiment needs (state-size
// experiments); it is pseudo-random so compression does not undo it.
//
// "Last" is by closing time (expiry, then auction id), not by arrival, so the
// kept list does not depend on how closings from several tasks interleave.
const Q6 = "nexmark-q6"

// Q6 parameters.
const (
	Q6Keep            = 10
	PricesState       = "prices"
	maxDummyFieldSize = 64 << 20
)

// Q6Result is q6's output value; the record key is the seller.
type Q6Result struct {
	Seller  int64   `json:"seller"`
	Average float64 `json:"average"` // of the kept prices, in cents
	Kept    int     `json:"kept"`    // prices averaged (≤ Q6Keep)
	Closed  int64   `json:"closed"`  // auctions of the seller closed so far
}

func buildQ6(src *dataplane.Stream, sink Sink) {
	closed := src.Process("q6-auctions", parser(auctionsAndBids), false).
		Process("q6-close", closerFactory(func(c Closed) []byte { return itoa(c.Seller) }), true)
	sink(closed.Process("q6-average", sellerAverageFactory, true))
}

// sellerAverage keeps, per seller, list state PricesState: a count item
// (closed so far, 8 bytes) followed by up to Q6Keep entries of expires,
// auction, price (8 bytes each) and the pad, ordered by (expires, auction).
type sellerAverage struct{ pad int }

func sellerAverageFactory(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
	n, err := control.IntParam(ctx.Job, control.ParamDummyFieldSize, 0, 0, maxDummyFieldSize, "bytes")
	if err != nil {
		return nil, fmt.Errorf("operator %s: %w", ctx.Spec.Name, err)
	}
	return &sellerAverage{pad: n}, nil
}

func (s *sellerAverage) StateNames() []string { return []string{PricesState} }

func (s *sellerAverage) ProcessBatch([]dataplane.Record, dataplane.Emit) error {
	return errors.New("q6 average called without keyed state (its input must be keyed)")
}

const q6EntryHead = 24

func (s *sellerAverage) ProcessKeyed(in []dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	for _, r := range in {
		c, err := DecodeClosed(r.Value)
		if err != nil {
			return fmt.Errorf("q6-average: key %q: %w", r.Key, err)
		}
		items := st.GetList(PricesState, r.Key)
		var closed int64
		var entries [][]byte
		if len(items) > 0 && len(items[0]) == 8 {
			closed, entries = int64(binary.LittleEndian.Uint64(items[0])), items[1:]
		}
		e := make([]byte, q6EntryHead+s.pad)
		binary.BigEndian.PutUint64(e, uint64(c.Expires))
		binary.BigEndian.PutUint64(e[8:], uint64(c.Auction))
		binary.LittleEndian.PutUint64(e[16:], uint64(c.Price))
		fillPad(e[q6EntryHead:], c.Auction)
		// Entries sort by their first 16 bytes (expires, auction; big-endian
		// of positive numbers sorts like the numbers).
		i, _ := slices.BinarySearchFunc(entries, e, func(a, b []byte) int { return compareHead(a, b) })
		entries = slices.Insert(slices.Clone(entries), i, e)
		if len(entries) > Q6Keep {
			entries = entries[len(entries)-Q6Keep:]
		}
		closed++
		var sum int64
		for _, it := range entries {
			if len(it) >= q6EntryHead {
				sum += int64(binary.LittleEndian.Uint64(it[16:]))
			}
		}
		st.SetList(PricesState, r.Key, append([][]byte{binary.LittleEndian.AppendUint64(nil, uint64(closed))}, entries...))
		r.Value = Q6Result{Seller: c.Seller, Average: float64(sum) / float64(len(entries)), Kept: len(entries), Closed: closed}.appendBinary(make([]byte, 0, resultCap))
		emit(r)
	}
	return nil
}

func compareHead(a, b []byte) int {
	return slices.Compare(a[:min(16, len(a))], b[:min(16, len(b))])
}

// fillPad fills pad with bytes derived from the auction id.
func fillPad(pad []byte, auction int64) {
	if len(pad) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(auction), 0x9e3779b97f4a7c15))
	for i := 0; i < len(pad); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(pad[i:], w[:])
	}
}
