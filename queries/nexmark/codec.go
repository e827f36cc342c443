package nexmark

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Binary record layout, version 1
//
// Generated Nexmark records and the values the queries pass between their
// operators are binary: JSON made a bid 110–135 bytes where its fields
// need under 30, and parsing one cost over 10 times as much
// (BenchmarkDecode). JSON is
// still read wherever records come from outside (Parse, model.go), and a
// produce request may still ask for it (Config.Encoding).
//
// A record is one tag byte, then the fields of its kind in the order of
// the tables below, nothing before or after:
//
//   - integers: signed varints (zigzag, encoding/binary's AppendVarint),
//     minimal length;
//   - strings: the byte length as a minimal uvarint, then the bytes;
//   - floats: the IEEE 754 bits, 8 bytes little-endian;
//   - a bid's channel: a uvarint code, 1–4 for the generator's channels
//     (Google, Facebook, Baidu, Apple, in that order; part of version 1,
//     never reordered), 0 followed by the channel as a string for any
//     other.
//
// The tag's bit 7 is always set, so no tag is a byte JSON text can start
// with (whitespace, '{' and every other JSON start are ASCII): one byte
// tells the encodings apart. Bits 4–6 are the layout version (1 here) and
// bits 0–3 the kind, so a layout that changes takes a new version and
// decoders name what they got. Decoding is strict — a truncated record,
// trailing bytes, an unknown tag, an overlong varint or a known channel
// spelt out are errors — so every record has one encoding, and whatever
// a producer or a bug gets wrong is counted as malformed by the parsers
// rather than misread.
//
//	kind  tag   fields
//	1     0x91  person: id, name, emailAddress, creditCard, city, state, dateTime, extra
//	2     0x92  auction: id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra
//	3     0x93  bid: auction, bidder, price, channel, url, dateTime, extra
//	4     0x94  closed auction: id, seller, price, category, dateTime, extra
//	5–11        query results (results_codec.go)
//
// Sizes over the first 2 M generated events (JSON in brackets): a bid
// 25–29 bytes (~115), a closed auction 15–20 plus its padding (~97), a
// person its strings plus ~16, 92 on average (200), an auction its strings
// plus ~30, 350 on average (500). People and auctions keep their padding
// (Config.AvgPersonBytes, AvgAuctionBytes), which is sized against the
// JSON form so an event is the same whichever encoding carries it (see
// jsonLen); bids are not padded, their JSON already being over 100 bytes.

// Encoding is a wire form of Nexmark records.
type Encoding string

// Encodings.
const (
	// Binary is the compact layout above: the default of generated
	// records.
	Binary Encoding = "binary"
	// JSON is {"bid":{…}} and so on (Event's field tags): what external
	// input files hold.
	JSON Encoding = "json"
)

// ParseEncoding checks an encoding name; "" is Binary.
func ParseEncoding(s string) (Encoding, error) {
	switch e := Encoding(strings.ToLower(strings.TrimSpace(s))); e {
	case "":
		return Binary, nil
	case Binary, JSON:
		return e, nil
	}
	return "", fmt.Errorf("nexmark Encoding %q: allowed are %q and %q (empty means %q)", s, Binary, JSON, Binary)
}

// Tag bits.
const (
	tagMark     = 0x80 // set in every tag: not JSON
	tagVersion1 = 0x10 // bits 4–6: layout version 1
)

// Kinds (tag bits 0–3) of version 1.
const (
	kindPerson = iota + 1
	kindAuction
	kindBid
	kindClosedAuction
	kindQ2Result
	kindQ3Result
	kindQ4Result
	kindQ6Result
	kindQ6ModResult
	kindQ7Result
	kindQ8Result
)

// kindNames name the kinds in errors.
var kindNames = [16]string{
	kindPerson: "person", kindAuction: "auction", kindBid: "bid", kindClosedAuction: "closed auction",
	kindQ2Result: "q2 result", kindQ3Result: "q3 result", kindQ4Result: "q4 result", kindQ6Result: "q6 result",
	kindQ6ModResult: "q6 modified result", kindQ7Result: "q7 result", kindQ8Result: "q8 result",
}

func tagOf(kind byte) byte { return tagMark | tagVersion1 | kind }

// isBinary says whether a record is binary: its first byte is a tag.
func isBinary(data []byte) bool { return len(data) > 0 && data[0]&tagMark != 0 }

// describeTag says what a record's first byte is, for errors.
func describeTag(tag byte) string {
	switch {
	case tag&tagMark == 0:
		return fmt.Sprintf("byte 0x%02x (not a binary tag: bit 7 clear)", tag)
	case tag>>4&7 != tagVersion1>>4:
		return fmt.Sprintf("tag 0x%02x (layout version %d, unknown: known is version 1)", tag, tag>>4&7)
	case kindNames[tag&0x0f] == "":
		return fmt.Sprintf("tag 0x%02x (version 1, kind %d unknown: known are 1 to %d)", tag, tag&0x0f, kindQ8Result)
	}
	return fmt.Sprintf("tag 0x%02x (%s)", tag, kindNames[tag&0x0f])
}

// Channels with a one-byte code in a bid (layout above).
var channelCodes = map[string]uint64{}

func init() {
	for i, c := range channels {
		channelCodes[c] = uint64(i + 1)
	}
}

// Appending fields.

func appendInt(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendFloat(dst []byte, f float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
}

func appendChannel(dst []byte, c string) []byte {
	if code, ok := channelCodes[c]; ok {
		return binary.AppendUvarint(dst, code)
	}
	return appendString(binary.AppendUvarint(dst, 0), c)
}

// reader decodes one binary record; the first error sticks, so a decoder
// reads every field and checks err once.
type reader struct {
	b    []byte
	off  int
	kind byte // what is being decoded, for errors
	err  error
	// s is b as a string, converted at the first string field: a record's
	// strings share one allocation.
	s string
}

// errTruncated marks a record that ends inside a field.
var errTruncated = errors.New("record ends inside the field")

// newReader checks data's tag against kind and returns a reader of the
// fields after it.
func newReader(data []byte, kind byte) reader {
	r := reader{b: data, off: 1, kind: kind}
	if len(data) == 0 || data[0] != tagOf(kind) {
		r.err = errBadTag(data, kind)
	}
	return r
}

// errBadTag says why data does not start with kind's tag; apart from
// newReader so that stays small enough to inline.
func errBadTag(data []byte, kind byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%s: empty record, want tag 0x%02x", kindNames[kind], tagOf(kind))
	}
	return fmt.Errorf("%s: record starts with %s, want tag 0x%02x", kindNames[kind], describeTag(data[0]), tagOf(kind))
}

func (r *reader) fail(field string, err error) {
	if r.err == nil {
		r.err = fmt.Errorf("%s.%s at byte %d of %d: %w", kindNames[r.kind], field, r.off, len(r.b), err)
	}
}

// uvarint reads a minimal uvarint.
func (r *reader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	switch {
	case n == 0:
		r.fail(field, errTruncated)
		return 0
	case n < 0:
		r.fail(field, errors.New("varint overflows 64 bits"))
		return 0
	case n > 1 && r.b[r.off+n-1] == 0:
		// A trailing zero group adds nothing: the same value has a
		// shorter encoding, so this record is not one we write.
		r.fail(field, errors.New("varint is not minimal"))
		return 0
	}
	r.off += n
	return v
}

// int reads a signed (zigzag) varint.
func (r *reader) int(field string) int64 {
	u := r.uvarint(field)
	return int64(u>>1) ^ -int64(u&1)
}

func (r *reader) str(field string) string {
	n := r.uvarint(field)
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(field, fmt.Errorf("string of %d bytes: %w", n, errTruncated))
		return ""
	}
	if n == 0 {
		return ""
	}
	if r.s == "" {
		r.s = string(r.b)
	}
	s := r.s[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *reader) float(field string) float64 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 8 {
		r.fail(field, errTruncated)
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return f
}

func (r *reader) channel(field string) string {
	code := r.uvarint(field)
	switch {
	case r.err != nil:
		return ""
	case code == 0:
		c := r.str(field)
		if known, ok := channelCodes[c]; ok && r.err == nil {
			r.fail(field, fmt.Errorf("channel %q spelt out: its code is %d", c, known))
		}
		return c
	case code > uint64(len(channels)):
		r.fail(field, fmt.Errorf("channel code %d: known are 0 (spelt out) to %d", code, len(channels)))
		return ""
	}
	return channels[code-1]
}

// done is the record's error: the first field's, or trailing bytes.
func (r *reader) done() error {
	if r.err == nil && r.off != len(r.b) {
		r.err = fmt.Errorf("%s: %d trailing bytes after the last field (record of %d bytes)", kindNames[r.kind], len(r.b)-r.off, len(r.b))
	}
	return r.err
}

// Events.

func appendPerson(dst []byte, p *Person) []byte {
	dst = append(dst, tagOf(kindPerson))
	dst = appendInt(dst, p.ID)
	dst = appendString(dst, p.Name)
	dst = appendString(dst, p.EmailAddress)
	dst = appendString(dst, p.CreditCard)
	dst = appendString(dst, p.City)
	dst = appendString(dst, p.State)
	dst = appendInt(dst, p.DateTime)
	return appendString(dst, p.Extra)
}

func readPerson(data []byte) (*Person, error) {
	r := newReader(data, kindPerson)
	p := &Person{ID: r.int("id"), Name: r.str("name"), EmailAddress: r.str("emailAddress"), CreditCard: r.str("creditCard"),
		City: r.str("city"), State: r.str("state"), DateTime: r.int("dateTime"), Extra: r.str("extra")}
	return p, r.done()
}

func appendAuction(dst []byte, a *Auction) []byte {
	dst = append(dst, tagOf(kindAuction))
	dst = appendInt(dst, a.ID)
	dst = appendString(dst, a.ItemName)
	dst = appendString(dst, a.Description)
	dst = appendInt(dst, a.InitialBid)
	dst = appendInt(dst, a.Reserve)
	dst = appendInt(dst, a.DateTime)
	dst = appendInt(dst, a.Expires)
	dst = appendInt(dst, a.Seller)
	dst = appendInt(dst, a.Category)
	return appendString(dst, a.Extra)
}

func readAuction(data []byte) (*Auction, error) {
	r := newReader(data, kindAuction)
	a := &Auction{ID: r.int("id"), ItemName: r.str("itemName"), Description: r.str("description"),
		InitialBid: r.int("initialBid"), Reserve: r.int("reserve"), DateTime: r.int("dateTime"), Expires: r.int("expires"),
		Seller: r.int("seller"), Category: r.int("category"), Extra: r.str("extra")}
	return a, r.done()
}

func appendBid(dst []byte, b *Bid) []byte {
	dst = append(dst, tagOf(kindBid))
	dst = appendInt(dst, b.Auction)
	dst = appendInt(dst, b.Bidder)
	dst = appendInt(dst, b.Price)
	dst = appendChannel(dst, b.Channel)
	dst = appendString(dst, b.URL)
	dst = appendInt(dst, b.DateTime)
	return appendString(dst, b.Extra)
}

func readBid(data []byte) (*Bid, error) {
	r := newReader(data, kindBid)
	b := &Bid{Auction: r.int("auction"), Bidder: r.int("bidder"), Price: r.int("price"), Channel: r.channel("channel"),
		URL: r.str("url"), DateTime: r.int("dateTime"), Extra: r.str("extra")}
	return b, r.done()
}

func appendClosedAuction(dst []byte, c *ClosedAuction) []byte {
	dst = append(dst, tagOf(kindClosedAuction))
	dst = appendInt(dst, c.ID)
	dst = appendInt(dst, c.Seller)
	dst = appendInt(dst, c.Price)
	dst = appendInt(dst, c.Category)
	dst = appendInt(dst, c.DateTime)
	return appendString(dst, c.Extra)
}

func readClosedAuction(data []byte) (*ClosedAuction, error) {
	r := newReader(data, kindClosedAuction)
	c := &ClosedAuction{ID: r.int("id"), Seller: r.int("seller"), Price: r.int("price"), Category: r.int("category"),
		DateTime: r.int("dateTime"), Extra: r.str("extra")}
	return c, r.done()
}

// decodeBinaryEvent decodes a binary event of any kind.
func decodeBinaryEvent(data []byte) (Event, error) {
	var e Event
	var err error
	switch data[0] {
	case tagOf(kindPerson):
		e.Person, err = readPerson(data)
	case tagOf(kindAuction):
		e.Auction, err = readAuction(data)
	case tagOf(kindBid):
		e.Bid, err = readBid(data)
	case tagOf(kindClosedAuction):
		e.ClosedAuction, err = readClosedAuction(data)
	default:
		return e, fmt.Errorf("record starts with %s, want an event: 0x%02x person, 0x%02x auction, 0x%02x bid or 0x%02x closed auction",
			describeTag(data[0]), tagOf(kindPerson), tagOf(kindAuction), tagOf(kindBid), tagOf(kindClosedAuction))
	}
	return e, err
}
