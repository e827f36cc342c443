package nexmark

import (
	"encoding/json"
	"strconv"
)

// jsonLen is len(json.Marshal(e)) without marshalling: the generator sizes
// every event's padding against its JSON form (the reference generator's
// sizes, Config.AvgPersonBytes and so on), whichever encoding carries it,
// so the stream's events do not depend on the encoding — and marshalling
// each event just to measure it would cost more than encoding it binary.
// Strings that JSON escapes (quotes, controls, <>&, non-ASCII) take the
// slow path through json.Marshal; generated strings have none.
func jsonLen(e Event) int {
	var w jsonSizer
	switch {
	case e.kinds() != 1:
		return w.marshalled(e)
	case e.Person != nil:
		p := e.Person
		w.object(`{"person":`)
		w.int("id", p.ID)
		w.str("name", p.Name)
		w.str("emailAddress", p.EmailAddress)
		w.str("creditCard", p.CreditCard)
		w.str("city", p.City)
		w.str("state", p.State)
		w.int("dateTime", p.DateTime)
		w.extra(p.Extra)
	case e.Auction != nil:
		a := e.Auction
		w.object(`{"auction":`)
		w.int("id", a.ID)
		w.str("itemName", a.ItemName)
		w.str("description", a.Description)
		w.int("initialBid", a.InitialBid)
		w.int("reserve", a.Reserve)
		w.int("dateTime", a.DateTime)
		w.int("expires", a.Expires)
		w.int("seller", a.Seller)
		w.int("category", a.Category)
		w.extra(a.Extra)
	case e.Bid != nil:
		b := e.Bid
		w.object(`{"bid":`)
		w.int("auction", b.Auction)
		w.int("bidder", b.Bidder)
		w.int("price", b.Price)
		w.str("channel", b.Channel)
		w.str("url", b.URL)
		w.int("dateTime", b.DateTime)
		w.extra(b.Extra)
	default:
		c := e.ClosedAuction
		w.object(`{"closedAuction":`)
		w.int("id", c.ID)
		w.int("seller", c.Seller)
		w.int("price", c.Price)
		w.int("category", c.Category)
		w.int("dateTime", c.DateTime)
		w.extra(c.Extra)
	}
	if w.escaped {
		return w.marshalled(e)
	}
	return w.n
}

// jsonSizer adds up the length of one event's JSON.
type jsonSizer struct {
	n       int
	fields  int
	escaped bool // a string needs escaping: measure by marshalling
}

// object starts the event: the wrapper, the inner object's braces and the
// wrapper's closing brace.
func (w *jsonSizer) object(wrapper string) { w.n += len(wrapper) + 3 }

// field adds a field's name, quotes, colon and separating comma.
func (w *jsonSizer) field(name string) {
	if w.fields > 0 {
		w.n++
	}
	w.fields++
	w.n += len(name) + 3
}

func (w *jsonSizer) int(name string, v int64) {
	w.field(name)
	var digits [20]byte
	w.n += len(strconv.AppendInt(digits[:0], v, 10))
}

func (w *jsonSizer) str(name, s string) {
	w.field(name)
	w.n += len(s) + 2
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			w.escaped = true
			return
		}
	}
}

// extra is omitted when empty (its field tag says omitempty).
func (w *jsonSizer) extra(s string) {
	if s != "" {
		w.str("extra", s)
	}
}

func (w *jsonSizer) marshalled(e Event) int {
	data, _ := json.Marshal(e)
	return len(data)
}
