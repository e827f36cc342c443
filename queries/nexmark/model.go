// Package nexmark is the Nexmark benchmark for koala: a deterministic
// event generator (people, auctions and bids in the proportion 1:3:46,
// binary-encoded by default (codec.go), registered as dataplane generator
// "nexmark") and the
// queries q1 (currency conversion), q2 (selection), q3 (person ⋈ auction by
// seller), q4 (average closing price per category), q5 (sliding-window bid
// count per auction), q6* (large-state average of each seller's last closing
// prices), q7 (tumbling-window highest bid) and q8 (windowed person ⋈
// auction), registered as "nexmark-q1" … "nexmark-q8" and under the
// artifact's names "nexmark_query1" … "nexmark_query8"; and the artifact's
// query6Mod, q6* over a stream of closed auctions with a fixed-size state
// per seller, registered as "nexmark_query6_modified" and "nexmark-q6mod".
//
// Records are binary (codec.go) or JSON; Parse reads both, so input files
// stay JSON. Malformed input (bad JSON, a truncated or unknown binary
// record, an unknown event kind, a missing required field) is never fatal: the parsing operator counts it in its
// "malformed_records" counter (Worker.OperatorCounters), hands it to the
// task's dead-letter path (dataplane.DeadLetters: counted, written to the
// job's DeadLetterTopic if set, logged rate-limited) and skips it.
package nexmark

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Person is a new user of the auction site.
type Person struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     int64  `json:"dateTime"` // unix milliseconds
	Extra        string `json:"extra,omitempty"`
}

// Auction is a new item for sale.
type Auction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"`
	Expires     int64  `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra,omitempty"`
}

// Bid is a bid on an auction; Price is in cents of a dollar.
type Bid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra,omitempty"`
}

// ClosedAuction is an auction that ended with a winning bid, as the
// artifact's closed-auction topic carries it (the input of
// nexmark_query6_modified, which starts from closed auctions instead of
// computing them); Price is the winning price in cents.
type ClosedAuction struct {
	ID       int64  `json:"id"`
	Seller   int64  `json:"seller"`
	Price    int64  `json:"price"`
	Category int64  `json:"category"`
	DateTime int64  `json:"dateTime"` // unix milliseconds
	Extra    string `json:"extra,omitempty"`
}

// Event is exactly one of a person, an auction, a bid or a closed auction;
// on the wire it is a tagged binary record (codec.go) or, in JSON,
// {"person":{…}}, {"auction":{…}}, {"bid":{…}} or {"closedAuction":{…}}.
type Event struct {
	Person        *Person        `json:"person,omitempty"`
	Auction       *Auction       `json:"auction,omitempty"`
	Bid           *Bid           `json:"bid,omitempty"`
	ClosedAuction *ClosedAuction `json:"closedAuction,omitempty"`
}

// ErrMalformed wraps every reason Parse rejects a record.
var ErrMalformed = errors.New("malformed nexmark event")

// EncodeEvent is the binary form of e (codec.go) that Parse reads back.
// The generator and q1 encode through AppendEvent alone, so the encoding
// can change in one place.
func EncodeEvent(e Event) ([]byte, error) { return AppendEvent(nil, e, Binary) }

// AppendEvent appends e in encoding enc to dst. An event without exactly
// one kind set is an error (JSON would write it, and Parse reject it).
func AppendEvent(dst []byte, e Event, enc Encoding) ([]byte, error) {
	if enc == JSON {
		data, err := json.Marshal(e)
		if err != nil {
			return dst, fmt.Errorf("encode nexmark %s event as JSON: %w", e.Kind(), err)
		}
		return append(dst, data...), nil
	}
	if enc != Binary {
		_, err := ParseEncoding(string(enc))
		return dst, err
	}
	if n := e.kinds(); n != 1 {
		return dst, fmt.Errorf("encode nexmark event: %d of person, auction, bid, closedAuction set (want exactly one)", n)
	}
	switch {
	case e.Person != nil:
		return appendPerson(dst, e.Person), nil
	case e.Auction != nil:
		return appendAuction(dst, e.Auction), nil
	case e.Bid != nil:
		return appendBid(dst, e.Bid), nil
	}
	return appendClosedAuction(dst, e.ClosedAuction), nil
}

// Parse decodes and validates one event, binary or JSON: a record whose
// first byte has bit 7 set is binary (codec.go: its tag), any other is
// JSON (which starts with '{' or whitespace). Either way the same fields
// are required.
func Parse(data []byte) (Event, error) {
	if !isBinary(data) {
		return parseJSON(data)
	}
	e, err := decodeBinaryEvent(data)
	if err != nil {
		return e, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return e, validate(e)
}

// parseJSON is Parse of a JSON record. It is a function of its own so the
// event json.Unmarshal fills (and so moves to the heap) is not the binary
// path's.
func parseJSON(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return e, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return e, validate(e)
}

// validate checks what every query relies on: exactly one kind, with its
// identifying fields set.
func validate(e Event) error {
	if p := e.Person; p != nil && (p.ID <= 0 || p.Name == "" || p.State == "" || p.DateTime <= 0) {
		return fmt.Errorf("%w: person without id, name, state or dateTime", ErrMalformed)
	}
	if a := e.Auction; a != nil && (a.ID <= 0 || a.Seller <= 0 || a.Category <= 0 || a.DateTime <= 0) {
		return fmt.Errorf("%w: auction without id, seller, category or dateTime", ErrMalformed)
	}
	if b := e.Bid; b != nil && (b.Auction <= 0 || b.Bidder <= 0 || b.Price <= 0 || b.DateTime <= 0) {
		return fmt.Errorf("%w: bid without auction, bidder, price or dateTime", ErrMalformed)
	}
	if c := e.ClosedAuction; c != nil && (c.ID <= 0 || c.Seller <= 0 || c.Price <= 0 || c.DateTime <= 0) {
		return fmt.Errorf("%w: closed auction without id, seller, price or dateTime", ErrMalformed)
	}
	if n := e.kinds(); n != 1 {
		return fmt.Errorf("%w: %d of person, auction, bid, closedAuction set (want exactly one)", ErrMalformed, n)
	}
	return nil
}

// kinds counts the kinds set in e.
func (e Event) kinds() int {
	n := 0
	if e.Person != nil {
		n++
	}
	if e.Auction != nil {
		n++
	}
	if e.Bid != nil {
		n++
	}
	if e.ClosedAuction != nil {
		n++
	}
	return n
}

// Kind names the event's kind.
func (e Event) Kind() string {
	switch {
	case e.Person != nil:
		return "person"
	case e.Auction != nil:
		return "auction"
	case e.Bid != nil:
		return "bid"
	case e.ClosedAuction != nil:
		return KindClosedAuction
	}
	return "none"
}
