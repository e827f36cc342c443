// Package nexmark is the Nexmark benchmark for koala: a deterministic
// event generator (people, auctions and bids in the proportion 1:3:46,
// JSON-encoded, registered as dataplane generator "nexmark") and the
// queries q1 (currency conversion), q2 (selection), q3 (person ⋈ auction by
// seller), q4 (average closing price per category), q5 (sliding-window bid
// count per auction), q6* (large-state average of each seller's last closing
// prices), q7 (tumbling-window highest bid) and q8 (windowed person ⋈
// auction), registered as "nexmark-q1" … "nexmark-q8" and under the
// artifact's names "nexmark_query1" … "nexmark_query8"; and the artifact's
// query6Mod, q6* over a stream of closed auctions with a fixed-size state
// per seller, registered as "nexmark_query6_modified" and "nexmark-q6mod".
//
// Malformed input (bad JSON, an unknown event kind, a missing required
// field) is never fatal: the parsing operator counts it in its
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
// on the wire it is {"person":{…}}, {"auction":{…}}, {"bid":{…}} or
// {"closedAuction":{…}}.
type Event struct {
	Person        *Person        `json:"person,omitempty"`
	Auction       *Auction       `json:"auction,omitempty"`
	Bid           *Bid           `json:"bid,omitempty"`
	ClosedAuction *ClosedAuction `json:"closedAuction,omitempty"`
}

// ErrMalformed wraps every reason Parse rejects a record.
var ErrMalformed = errors.New("malformed nexmark event")

// EncodeEvent is the wire form of e that Parse reads back. The generator
// encodes through it alone, so the encoding can change in one place.
func EncodeEvent(e Event) ([]byte, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode nexmark %s event: %w", e.Kind(), err)
	}
	return data, nil
}

// Parse decodes and validates one event.
func Parse(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return e, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	n := 0
	if e.Person != nil {
		n++
		if e.Person.ID <= 0 || e.Person.Name == "" || e.Person.State == "" || e.Person.DateTime <= 0 {
			return e, fmt.Errorf("%w: person without id, name, state or dateTime", ErrMalformed)
		}
	}
	if e.Auction != nil {
		n++
		if e.Auction.ID <= 0 || e.Auction.Seller <= 0 || e.Auction.Category <= 0 || e.Auction.DateTime <= 0 {
			return e, fmt.Errorf("%w: auction without id, seller, category or dateTime", ErrMalformed)
		}
	}
	if e.Bid != nil {
		n++
		if e.Bid.Auction <= 0 || e.Bid.Bidder <= 0 || e.Bid.Price <= 0 || e.Bid.DateTime <= 0 {
			return e, fmt.Errorf("%w: bid without auction, bidder, price or dateTime", ErrMalformed)
		}
	}
	if c := e.ClosedAuction; c != nil {
		n++
		if c.ID <= 0 || c.Seller <= 0 || c.Price <= 0 || c.DateTime <= 0 {
			return e, fmt.Errorf("%w: closed auction without id, seller, price or dateTime", ErrMalformed)
		}
	}
	if n != 1 {
		return e, fmt.Errorf("%w: %d of person, auction, bid, closedAuction set (want exactly one)", ErrMalformed, n)
	}
	return e, nil
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
