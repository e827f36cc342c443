package nexmark

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// codecEvents are events of every kind: generated ones (the mix, the
// closed-auction stream with padding) and hand-made ones on the edges of
// the layout (extreme and negative numbers where nothing is validated, a
// channel without a code, empty and non-ASCII strings).
func codecEvents(t testing.TB) []Event {
	t.Helper()
	var out []Event
	for _, cfg := range []Config{{Seed: 1}, {Seed: 2, Kinds: []string{"ClosedAuction"}, ExtraPayloadSize: 40}} {
		cfg.BaseTime, cfg.InterEventNanos = 1_700_000_000_000*int64(time.Millisecond), int64(time.Millisecond)
		g, err := NewGenerator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for n := int64(0); n < 120; n++ {
			out = append(out, g.Event(g.EventNumber(n), g.Timestamp(g.EventNumber(n))))
		}
	}
	return append(out, edgeEvents()...)
}

// edgeEvents are hand-written events with edge values.
func edgeEvents() []Event {
	return []Event{
		{Person: &Person{ID: math.MaxInt64, Name: "Zoë \"Z\" <z>", State: "OR", DateTime: 1, Extra: strings.Repeat("x", 300)}},
		{Auction: &Auction{ID: 1, Seller: 1, Category: 1, DateTime: 1, InitialBid: math.MinInt64, Reserve: -1, Expires: -5}},
		{Bid: &Bid{Auction: 1, Bidder: 1, Price: math.MaxInt64, DateTime: 1, Channel: "Lycos", URL: "", Extra: "\x00\xff"}},
		{Bid: &Bid{Auction: 1, Bidder: 1, Price: 1, DateTime: 1}},
		{ClosedAuction: &ClosedAuction{ID: 1, Seller: 2, Price: 3, Category: -4, DateTime: 5}},
	}
}

// results are values of every result type, with edge values.
var results = []struct {
	enc    []byte
	decode func([]byte) (any, error)
}{
	{Q2Result{Auction: 123, Price: -1}.appendBinary(nil), func(b []byte) (any, error) { return DecodeQ2Result(b) }},
	{Q3Result{Name: "Kate Smith", City: "Bend", State: "OR", Auction: 1 << 40}.appendBinary(nil), func(b []byte) (any, error) { return DecodeQ3Result(b) }},
	{Q4Result{Category: 10, Average: 1234.5, Closed: 7}.appendBinary(nil), func(b []byte) (any, error) { return DecodeQ4Result(b) }},
	{Q6Result{Seller: 1001, Average: math.Inf(1), Kept: 10, Closed: 99}.appendBinary(nil), func(b []byte) (any, error) { return DecodeQ6Result(b) }},
	{Q6ModResult{Seller: 1001, Average: 0.1}.appendBinary(nil), func(b []byte) (any, error) { return DecodeQ6ModResult(b) }},
	{Q7Result{Auction: 1, Bidder: 2, Price: 3, WindowEnd: 1_700_000_000_000}.appendBinary(nil), func(b []byte) (any, error) { return DecodeQ7Result(b) }},
	{Q8Result{ID: 5, Name: "", WindowStart: -1, Auction: 6}.appendBinary(nil), func(b []byte) (any, error) { return DecodeQ8Result(b) }},
}

// reencode is the binary encoding of a decoded value (event or result).
func reencode(t testing.TB, v any) []byte {
	switch v := v.(type) {
	case Event:
		data, err := EncodeEvent(v)
		if err != nil {
			t.Fatal(err)
		}
		return data
	case interface{ appendBinary([]byte) []byte }:
		return v.appendBinary(nil)
	}
	t.Fatalf("no encoder for %T", v)
	return nil
}

// Every event reads back as itself from both encodings, and its binary
// form is one canonical byte string.
func TestEventRoundTrip(t *testing.T) {
	for i, e := range codecEvents(t) {
		bin, err := EncodeEvent(e)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !isBinary(bin) {
			t.Fatalf("event %d: binary form starts with 0x%02x", i, bin[0])
		}
		got, err := Parse(bin)
		if err != nil {
			t.Fatalf("event %d (%x): %v", i, bin, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("event %d: binary %x reads back as another event", i, bin)
		}
		if again := reencode(t, got); !bytes.Equal(again, bin) {
			t.Fatalf("event %d: re-encoded %x, want %x", i, again, bin)
		}
		js, err := AppendEvent(nil, e, JSON)
		if err != nil {
			t.Fatal(err)
		}
		if fromJSON, err := Parse(js); err != nil || !bytes.Equal(reencode(t, fromJSON), bin) {
			// JSON replaces invalid UTF-8, so only valid strings compare.
			if b := e.Bid; b == nil || b.Extra != "\x00\xff" {
				t.Fatalf("event %d: JSON %s reads as another event (%v)", i, js, err)
			}
		}
	}
}

// Every proper prefix of a valid record, and the record with a byte
// appended, is rejected — as malformed, for events.
func TestTruncatedAndTrailingRejected(t *testing.T) {
	check := func(name string, enc []byte, decode func([]byte) error) {
		t.Helper()
		for n := range len(enc) {
			if err := decode(enc[:n]); err == nil {
				t.Fatalf("%s: the first %d of %d bytes (%x) decoded", name, n, len(enc), enc[:n])
			}
		}
		if err := decode(append(bytes.Clone(enc), 0)); err == nil || !strings.Contains(err.Error(), "trailing") {
			t.Fatalf("%s with a trailing byte: error %v", name, err)
		}
	}
	for i, e := range codecEvents(t) {
		bin, _ := EncodeEvent(e)
		check(e.Kind(), bin, func(b []byte) error {
			_, err := Parse(b)
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Fatalf("event %d: error %v does not wrap ErrMalformed", i, err)
			}
			return err
		})
	}
	for _, r := range results {
		check(kindNames[r.enc[0]&0x0f], r.enc, func(b []byte) error { _, err := r.decode(b); return err })
	}
}

// Records that are not valid version-1 layouts are errors naming why.
func TestBinaryRejects(t *testing.T) {
	bid, _ := EncodeEvent(Event{Bid: &Bid{Auction: 1000, Bidder: 1001, Price: 5, Channel: "Apple", URL: "n.io/x", DateTime: 1}})
	// A bid spelling out a known channel: code 0, then "Google".
	spelt := append([]byte{tagOf(kindBid), 2, 2, 2, 0}, 6)
	spelt = append(append(spelt, "Google"...), 0, 2, 0)
	for _, tc := range []struct {
		name, data, want string
	}{
		{"empty", "", "unexpected end of JSON input"},
		{"unknown version", "\xa3\x02\x02\x02", "layout version 2, unknown"},
		{"unknown kind", "\x9f\x02", "kind 15 unknown"},
		{"a result is no event", string(Q2Result{Auction: 1, Price: 1}.appendBinary(nil)), "q2 result"},
		{"overlong varint", "\x93\x82\x00", "not minimal"},
		{"varint overflow", "\x93\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "overflows"},
		{"channel code out of range", "\x93\x02\x02\x02\x09\x00\x02\x00", "channel code 9"},
		{"known channel spelt out", string(spelt), `channel "Google" spelt out`},
		{"string beyond the end", "\x93\x02\x02\x02\x01\x7f", "string of 127 bytes"},
		{"price 0 (validation)", "\x93\x02\x02\x00\x01\x00\x02\x00", "bid without auction, bidder, price or dateTime"},
	} {
		_, err := Parse([]byte(tc.data))
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s (%x): error %v, want ErrMalformed saying %q", tc.name, tc.data, err, tc.want)
		}
	}
	if _, err := DecodeQ6ModResult(bid); err == nil || !strings.Contains(err.Error(), "tag 0x93 (bid)") {
		t.Errorf("a bid as a q6 modified result: error %v", err)
	}
	if _, err := DecodeQ4Result([]byte(`{"category":1}`)); err == nil || !strings.Contains(err.Error(), "bit 7 clear") {
		t.Errorf("JSON as a q4 result: error %v", err)
	}
}

func TestResultRoundTrip(t *testing.T) {
	for _, r := range results {
		v, err := r.decode(r.enc)
		if err != nil {
			t.Fatalf("%x: %v", r.enc, err)
		}
		if again := reencode(t, v); !bytes.Equal(again, r.enc) {
			t.Fatalf("%T: re-encoded %x, want %x", v, again, r.enc)
		}
	}
}

// jsonLen, which sizes the generator's padding, is the JSON's length.
func TestJSONLen(t *testing.T) {
	for i, e := range append(codecEvents(t), Event{}, Event{Bid: &Bid{}, Person: &Person{}}) {
		for _, extra := range []string{"", "abc"} {
			switch {
			case e.Person != nil && e.Bid == nil:
				e.Person.Extra = extra
			case e.Bid != nil && e.Person == nil:
				e.Bid.Extra = extra
			}
			data, _ := json.Marshal(e)
			if got := jsonLen(e); got != len(data) {
				t.Fatalf("event %d (extra %q): jsonLen %d, JSON %d bytes: %s", i, extra, got, len(data), data)
			}
		}
	}
}

// The encoding is the request's: binary by default, JSON on request, and
// nothing else.
func TestEncodingChoice(t *testing.T) {
	first := func(enc string) []byte {
		g, err := produce.NewGenerator(control.ProduceRequest{Generator: GeneratorName, Seed: 1, Nexmark: &control.NexmarkSource{Encoding: enc}})
		if err != nil {
			t.Fatalf("encoding %q: %v", enc, err)
		}
		var r dataplane.Record
		g.Next(0, &r)
		return r.Value
	}
	if v := first(""); v[0] != tagOf(kindPerson) {
		t.Errorf("default encoding: record %x is not a binary person", v)
	}
	if v := first("JSON"); v[0] != '{' {
		t.Errorf("encoding JSON: record %q", v)
	}
	_, err := NewGenerator(Config{Encoding: "avro"})
	if err == nil || !strings.Contains(err.Error(), `"avro"`) || !strings.Contains(err.Error(), `"binary"`) {
		t.Errorf("encoding avro: error %v, want it named with the allowed ones", err)
	}
	if _, err := AppendEvent(nil, Event{Bid: &Bid{}}, "xml"); err == nil {
		t.Error("AppendEvent with encoding xml: no error")
	}
	if _, err := EncodeEvent(Event{}); err == nil {
		t.Error("EncodeEvent of an event without a kind: no error")
	}
}

// FuzzParse: no input panics the decoder, and every binary record it
// accepts is the canonical encoding of what it decoded.
func FuzzParse(f *testing.F) {
	// A few events of each kind, not all 245: before fuzzing, the
	// coordinator runs every seed with coverage one call at a time (about 20
	// a second here), and 491 seeds outlasted the 10 s -fuzztime that
	// TestFaultFuzzTargets gives this target, so it never fuzzed.
	seeds := edgeEvents()
	perKind := map[string]int{}
	for _, e := range codecEvents(f) {
		if perKind[e.Kind()] < 4 {
			perKind[e.Kind()]++
			seeds = append(seeds, e)
		}
	}
	for _, e := range seeds {
		bin, _ := EncodeEvent(e)
		f.Add(bin)
		js, _ := AppendEvent(nil, e, JSON)
		f.Add(js)
	}
	f.Add([]byte{0x93, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if isBinary(data) && !bytes.Equal(reencode(t, e), data) {
			t.Fatalf("accepted %x, which is not the encoding of what it decoded to", data)
		}
	})
}

// FuzzDecodeResults: the same for the result decoders.
func FuzzDecodeResults(f *testing.F) {
	for _, r := range results {
		f.Add(r.enc)
	}
	f.Add(binary.AppendUvarint([]byte{tagOf(kindQ3Result)}, math.MaxUint64))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range results {
			v, err := r.decode(data)
			if err == nil && !bytes.Equal(reencode(t, v), data) {
				t.Fatalf("accepted %x as %T, which is not the encoding of what it decoded to", data, v)
			}
		}
	})
}
