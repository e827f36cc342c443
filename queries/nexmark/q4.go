package nexmark

import (
	"encoding/binary"
	"fmt"

	"koala/dataplane"
)

// Q4 is Nexmark q4: the average closing price of auctions per category.
// Auctions and bids are keyed by auction id ("q4-auctions"), each auction
// closes when event time passes its expiry ("q4-close", see closer), and
// "q4-average" keeps a running average per category in value state,
// emitting it after every closed auction.
const Q4 = "nexmark-q4"

// AverageState is the value state of the running averages: sum and count
// (8 bytes little-endian each).
const AverageState = "average"

// Q4Result is q4's output value; the record key is the category.
type Q4Result struct {
	Category int64   `json:"category"`
	Average  float64 `json:"average"` // of the winning prices, in cents
	Closed   int64   `json:"closed"`  // auctions of the category closed so far
}

func buildQ4(src *dataplane.Stream, sink Sink) {
	closed := src.Process("q4-auctions", parser(auctionsAndBids), false).
		Process("q4-close", closerFactory(func(c Closed) []byte { return itoa(c.Category) }), true)
	sink(closed.KeyedStateful("q4-average", []string{AverageState}, categoryAverage))
}

// categoryAverage folds one closed auction into its category's average.
func categoryAverage(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	c, err := DecodeClosed(r.Value)
	if err != nil {
		return fmt.Errorf("q4-average: key %q: %w", r.Key, err)
	}
	var sum, n int64
	if v := st.Get(AverageState, r.Key); len(v) == 16 {
		sum, n = int64(binary.LittleEndian.Uint64(v)), int64(binary.LittleEndian.Uint64(v[8:]))
	}
	sum, n = sum+c.Price, n+1
	v := binary.LittleEndian.AppendUint64(make([]byte, 0, 16), uint64(sum))
	st.Put(AverageState, r.Key, binary.LittleEndian.AppendUint64(v, uint64(n)))
	r.Value = Q4Result{Category: c.Category, Average: float64(sum) / float64(n), Closed: n}.appendBinary(make([]byte, 0, resultCap))
	emit(r)
	return nil
}
