package nexmark

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/queries"
)

// Query names, as registered with package queries.
const (
	Q1 = "nexmark-q1"
	Q2 = "nexmark-q2"
	Q3 = "nexmark-q3"
	Q5 = "nexmark-q5"
	Q7 = "nexmark-q7"
)

// queryNames are the queries Build knows.
var queryNames = []string{"q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"}

// Query parameters.
const (
	// DollarToEuro is q1's conversion: price·89/100.
	DollarToEuroNum, DollarToEuroDen = 89, 100
	// AuctionSkip is q2's selection: bids on auctions divisible by it.
	AuctionSkip = 123
	// Q3Category and Q3States select q3's auctions and sellers.
	Q3Category = 10
	// Default windows (job parameter "WindowDuration" overrides the size;
	// q5's slide keeps its ratio to the size).
	Q5WindowSize  = 10 * time.Second
	Q5WindowSlide = 2 * time.Second
	Q7WindowSize  = 10 * time.Second
)

// Q3States are the states of q3's sellers.
var Q3States = map[string]bool{"OR": true, "ID": true, "CA": true}

// Sink ends a query's stream.
type Sink func(s *dataplane.Stream) *dataplane.QueryBuilder

// CountSink is the sink of the registered queries: the runtime's counting
// sink (the exactness ledger counts records by source offset).
func CountSink(s *dataplane.Stream) *dataplane.QueryBuilder { return s.Sink("sink") }

// RecordSink keeps the output in memory (dataplane.CollectedRecords).
func RecordSink(s *dataplane.Stream) *dataplane.QueryBuilder { return s.RecordSink("sink") }

// Build returns query q (one of queryNames) named name, ending in sink.
func Build(q, name string, sink Sink) (*dataplane.QueryBuilder, error) {
	b := dataplane.NewQuery(name)
	src := b.Source("source", 1)
	switch q {
	case "q1":
		b.Describe("Nexmark q1: bids with prices converted to euros")
		sink(src.Process("q1-currency", parser(q1), false))
	case "q2":
		b.Describe(fmt.Sprintf("Nexmark q2: bids on auctions divisible by %d", AuctionSkip))
		sink(src.Process("q2-filter", parser(q2), false))
	case "q3":
		b.Describe("Nexmark q3: people in OR, ID or CA ⋈ their auctions of category 10, by seller")
		persons := src.Process("q3-persons", parserWith(q3Persons), false)
		auctions := src.Process("q3-auctions", parser(q3Auction), false)
		sink(persons.Join("q3-join", auctions, dataplane.JoinSpec{Join: q3Join}))
	case "q4":
		b.Describe("Nexmark q4: average closing price of auctions per category")
		buildQ4(src, sink)
	case "q6":
		b.Describe(fmt.Sprintf("Nexmark q6*: average of the last %d closing prices per seller, with DummyFieldSize bytes of state per price", Q6Keep))
		buildQ6(src, sink)
	case "q8":
		b.Describe("Nexmark q8: new people ⋈ their new auctions in tumbling event-time windows")
		buildQ8(src, sink)
	case "q5":
		b.Describe("Nexmark q5: bids per auction in sliding event-time windows")
		bids := src.Process("q5-bids", parser(bidsByAuction), false)
		sink(bids.Window("q5-window", dataplane.WindowSpec{Size: Q5WindowSize, Slide: Q5WindowSlide, SizeParam: "WindowDuration"},
			func() dataplane.Aggregator { return dataplane.CountAggregator{} }))
	case "q7":
		b.Describe("Nexmark q7: the highest bid of each tumbling event-time window")
		bids := src.Process("q7-bids", parser(q7Bid), false)
		sink(bids.Window("q7-window", dataplane.WindowSpec{Size: Q7WindowSize, SizeParam: "WindowDuration"},
			func() dataplane.Aggregator { return maxBid{} }))
	default:
		return nil, fmt.Errorf("nexmark query %q: known are %s", q, strings.Join(queryNames, ", "))
	}
	return b, nil
}

func init() {
	for _, q := range queryNames {
		b, err := Build(q, "nexmark-"+q, CountSink)
		if err != nil {
			panic(err)
		}
		if err := queries.Register(queries.Query{Name: b.Name(), Description: b.Description(), Operators: b.MustBuild(), Unchecked: unchecked(q), Unordered: unordered(q)}); err != nil {
			panic(err)
		}
	}
}

// unchecked is why the run's sink ledger cannot check query q (see
// queries.Query.Unchecked). Only q1 passes records through one to one —
// given a bids-only stream (EventType Bid, as the artifact's hello world
// configures it); the others filter, join or aggregate and are checked by
// their oracle tests in this package.
func unchecked(q string) string {
	if q == "q1" {
		return ""
	}
	return "Nexmark " + q + " filters, joins or aggregates, so its sink does not get each input record once; its oracle test in queries/nexmark checks it"
}

// unordered is why the sink ledger cannot check per-key order for the
// ledger-checked query q (see queries.Query.Unordered).
func unordered(q string) string {
	if q == "q1" {
		return "q1's map is keyed by the input record's key (the event) and its output by auction, so one auction's bids reach the sink from several map tasks in no fixed order"
	}
	return ""
}

// parseOp parses each record as a Nexmark event and hands good ones to fn;
// malformed records are counted and handed to the task's dead-letter path
// (which writes them to the job's DeadLetterTopic, if any, and logs them
// rate-limited), then skipped.
type parseOp struct {
	fn        func(e Event, r dataplane.Record, emit dataplane.Emit)
	dead      *kafkaio.DeadLetters
	parsed    atomic.Uint64
	malformed atomic.Uint64
}

func parser(fn func(Event, dataplane.Record, dataplane.Emit)) dataplane.OperatorFactory {
	return parserWith(func(dataplane.OperatorContext) (func(Event, dataplane.Record, dataplane.Emit), error) { return fn, nil })
}

// parserWith is parser for a function that depends on the task's context
// (its job parameters); newFn is called once per task.
func parserWith(newFn func(dataplane.OperatorContext) (func(Event, dataplane.Record, dataplane.Emit), error)) dataplane.OperatorFactory {
	return func(ctx dataplane.OperatorContext) (dataplane.Operator, error) {
		fn, err := newFn(ctx)
		if err != nil {
			return nil, fmt.Errorf("operator %s: %w", ctx.Spec.Name, err)
		}
		dead := ctx.DeadLetters
		if dead == nil { // built outside a worker
			dead = kafkaio.NewTestDeadLetters(ctx.Spec.Name)
		}
		return &parseOp{fn: fn, dead: dead}, nil
	}
}

func (p *parseOp) ProcessBatch(in []dataplane.Record, emit dataplane.Emit) error {
	for _, r := range in {
		e, err := Parse(r.Value)
		if err != nil {
			p.malformed.Add(1)
			p.dead.Reject(r, kafkaio.ReasonMalformed, err)
			continue
		}
		p.parsed.Add(1)
		p.fn(e, r, emit)
	}
	return nil
}

func (p *parseOp) Counters() map[string]uint64 {
	return map[string]uint64{"malformed_records": p.malformed.Load(), "parsed_records": p.parsed.Load()}
}

func itoa(v int64) []byte { return strconv.AppendInt(nil, v, 10) }

// resultCap is the capacity a result value is encoded into: the fixed
// fields of every result fit, so most take one allocation.
const resultCap = 32

// encodeBid is q1's output value: the bid, binary (codec.go).
func encodeBid(b *Bid) []byte {
	return appendBid(make([]byte, 0, resultCap+len(b.URL)+len(b.Extra)), b)
}

// q1 converts a bid's price to euros; the record keeps its identity.
func q1(e Event, r dataplane.Record, emit dataplane.Emit) {
	if e.Bid == nil {
		return
	}
	b := *e.Bid
	b.Price = b.Price * DollarToEuroNum / DollarToEuroDen
	r.Key, r.Value = itoa(b.Auction), encodeBid(&b)
	emit(r)
}

// Q2Result is q2's output value.
type Q2Result struct {
	Auction int64 `json:"auction"`
	Price   int64 `json:"price"`
}

func q2(e Event, r dataplane.Record, emit dataplane.Emit) {
	if e.Bid == nil || e.Bid.Auction%AuctionSkip != 0 {
		return
	}
	r.Key, r.Value = itoa(e.Bid.Auction), Q2Result{Auction: e.Bid.Auction, Price: e.Bid.Price}.appendBinary(make([]byte, 0, resultCap))
	emit(r)
}

// Q3Result is q3's output value; the record key is the seller id.
type Q3Result struct {
	Name    string `json:"name"`
	City    string `json:"city"`
	State   string `json:"state"`
	Auction int64  `json:"id"`
}

// MaxQ3DummyFieldSize bounds q3's person pad.
const MaxQ3DummyFieldSize = 1 << 20

// q3Persons keeps q3's people, each value a Q3Result followed by
// DummyFieldSize bytes of pad (job parameter, default 0) drawn from the
// person id: the join keeps every person it saw, so the pad sizes its
// state per seller, as the artifact's UseDummyField does.
func q3Persons(ctx dataplane.OperatorContext) (func(Event, dataplane.Record, dataplane.Emit), error) {
	n, err := control.IntParam(ctx.Job, control.ParamDummyFieldSize, 0, 0, MaxQ3DummyFieldSize, "bytes")
	if err != nil {
		return nil, err
	}
	return func(e Event, r dataplane.Record, emit dataplane.Emit) {
		if e.Person == nil || !Q3States[e.Person.State] {
			return
		}
		res := Q3Result{Name: e.Person.Name, City: e.Person.City, State: e.Person.State}
		v := res.appendBinary(make([]byte, 0, resultCap+len(res.Name)+len(res.City)+n))
		v = v[:len(v)+n]
		fillPad(v[len(v)-n:], e.Person.ID)
		r.Key, r.Value = itoa(e.Person.ID), v
		emit(r)
	}, nil
}

func q3Auction(e Event, r dataplane.Record, emit dataplane.Emit) {
	if e.Auction == nil || e.Auction.Category != Q3Category {
		return
	}
	r.Key, r.Value = itoa(e.Auction.Seller), itoa(e.Auction.ID)
	emit(r)
}

// q3Join completes the person's result (q3Person) with the auction id.
// Both values come from q3's own operators, so neither fails to decode
// unless the code changes its layouts; such a pair is not emitted.
func q3Join(key []byte, person, auction dataplane.Record) (dataplane.Record, bool) {
	res, err := decodeQ3Person(person.Value)
	if err != nil {
		return dataplane.Record{}, false
	}
	id, err := strconv.ParseInt(string(auction.Value), 10, 64)
	if err != nil {
		return dataplane.Record{}, false
	}
	res.Auction = id
	return dataplane.Record{Key: key, Value: res.appendBinary(make([]byte, 0, resultCap+len(res.Name)+len(res.City)))}, true
}

// bidsByAuction keys bids by auction for q5's windows.
func bidsByAuction(e Event, r dataplane.Record, emit dataplane.Emit) {
	if e.Bid == nil {
		return
	}
	r.Key, r.Value = itoa(e.Bid.Auction), nil
	emit(r)
}

// q7 sends every bid to one key with a compact value: price, auction,
// bidder (8 bytes each, little-endian).
func q7Bid(e Event, r dataplane.Record, emit dataplane.Emit) {
	if e.Bid == nil {
		return
	}
	v := make([]byte, 24)
	binary.LittleEndian.PutUint64(v, uint64(e.Bid.Price))
	binary.LittleEndian.PutUint64(v[8:], uint64(e.Bid.Auction))
	binary.LittleEndian.PutUint64(v[16:], uint64(e.Bid.Bidder))
	r.Key, r.Value = []byte("max"), v
	emit(r)
}

// Q7Result is q7's output value; the record key is "max@<window end ms>".
type Q7Result struct {
	Auction   int64 `json:"auction"`
	Bidder    int64 `json:"bidder"`
	Price     int64 `json:"price"`
	WindowEnd int64 `json:"windowEnd"` // unix ms
}

// maxBid keeps the highest bid: higher price, then lower auction, then
// lower bidder (a total order, so the result does not depend on arrival).
type maxBid struct{}

func (maxBid) Zero() []byte { return make([]byte, 24) }

func better(a, b []byte) bool {
	for i, dir := range []int{1, -1, -1} {
		x, y := binary.LittleEndian.Uint64(a[i*8:]), binary.LittleEndian.Uint64(b[i*8:])
		if x != y {
			return (x > y) == (dir > 0)
		}
	}
	return false
}

func (maxBid) Add(acc []byte, r dataplane.Record) []byte {
	if len(r.Value) == 24 && (binary.LittleEndian.Uint64(acc) == 0 || better(r.Value, acc)) {
		copy(acc, r.Value)
	}
	return acc
}

func (maxBid) Result(key []byte, end int64, acc []byte) dataplane.Record {
	res := Q7Result{
		Price: int64(binary.LittleEndian.Uint64(acc)), Auction: int64(binary.LittleEndian.Uint64(acc[8:])),
		Bidder: int64(binary.LittleEndian.Uint64(acc[16:])), WindowEnd: end / int64(time.Millisecond),
	}
	return dataplane.Record{Key: dataplane.WindowResultKey(key, end), Value: res.appendBinary(make([]byte, 0, resultCap))}
}
