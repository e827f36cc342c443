package nexmark_test

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries"
	"koala/queries/nexmark"
	"koala/workflows/wftest"
)

const (
	numEvents = 20000
	base      = int64(1_700_000_000_000) * int64(time.Millisecond)
)

func testGenerator() *nexmark.Generator { return mustGenerator(nexmark.Config{Seed: 42}) }

// mustGenerator returns the generator of cfg with the tests' event times.
func mustGenerator(cfg nexmark.Config) *nexmark.Generator {
	cfg.BaseTime, cfg.InterEventNanos = base, int64(time.Millisecond)
	g, err := nexmark.NewGenerator(cfg)
	if err != nil {
		panic(err)
	}
	return g
}

// malformed are bad records mixed into every input, JSON and binary: the
// parsers must count and skip them.
var malformed = append([][]byte{
	[]byte(`{"bid":`),
	[]byte(`not json`),
	[]byte(`{}`),
	[]byte(`42`),
	[]byte(`{"bid":{"auction":1000,"bidder":1001}}`),
	[]byte(`{"person":{"id":1000,"name":"x","state":"OR","dateTime":1},"bid":{"auction":1,"bidder":1,"price":1,"dateTime":1}}`),
	[]byte(`{"auction":{"id":1000,"seller":"1000","category":10,"dateTime":1}}`),
}, binaryMalformed()...)

// binaryMalformed are a truncated bid, a bid with a trailing byte and a
// record of an unknown layout version.
func binaryMalformed() [][]byte {
	bid, err := nexmark.EncodeEvent(nexmark.Event{Bid: &nexmark.Bid{Auction: 1000, Bidder: 1001, Price: 5, Channel: "Google", URL: "n.io/x", DateTime: 1}})
	if err != nil {
		panic(err)
	}
	return [][]byte{bid[:len(bid)-1], append(slices.Clone(bid), 0), {0xa3, 2, 2, 2}}
}

// malformedEvery spreads the malformed records over an input: one after
// event malformedEvery/2, then one every malformedEvery events, so all of
// them fit in numEvents.
const malformedEvery = 2000

// malformedAfter is the malformed record that follows event i, if any.
func malformedAfter(i int) ([]byte, bool) {
	if i%malformedEvery != malformedEvery/2 || i/malformedEvery >= len(malformed) {
		return nil, false
	}
	return malformed[i/malformedEvery], true
}

// input is the generated stream with the malformed records spread in.
func input() ([]dataplane.Record, []nexmark.Event) {
	g := testGenerator()
	var recs []dataplane.Record
	var events []nexmark.Event
	for n := int64(0); n < numEvents; n++ {
		var r dataplane.Record
		g.Next(n, &r)
		recs = append(recs, r)
		events = append(events, g.Event(n, g.Timestamp(n)))
		if bad, ok := malformedAfter(int(n)); ok {
			recs = append(recs, dataplane.Record{Key: []byte("bad"), Value: bad, EventTime: r.EventTime})
		}
	}
	return recs, events
}

var registered sync.Map

// registerRecordQuery registers Nexmark query q ending in a record sink
// (once) and returns its name. The variant is judged by the sink ledger like
// the registered query: same Unchecked and Unordered reasons.
func registerRecordQuery(t testing.TB, q string) string {
	t.Helper()
	name := "nexmark-" + q + "-records"
	if _, dup := registered.LoadOrStore(name, true); !dup {
		b, err := nexmark.Build(q, name, nexmark.RecordSink)
		if err != nil {
			t.Fatal(err)
		}
		orig := "nexmark-" + q
		if err := queries.Register(queries.Query{Name: name, Operators: b.MustBuild(),
			Unchecked: queries.Unchecked(orig), Unordered: queries.Unordered(orig)}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// parsers is how many operators of query q parse the source's records.
func parsers(q string) int {
	if q == "q3" || q == "q8" {
		return 2
	}
	return 1
}

// checkMalformed checks that every parsing operator of q counted each
// malformed record of input once and handed it to its dead-letter path.
func checkMalformed(t *testing.T, q string, res wftest.Result) {
	t.Helper()
	var bad uint64
	for _, cs := range res.Counters {
		bad += cs["malformed_records"]
	}
	want := uint64(parsers(q) * len(malformed))
	if bad != want {
		t.Fatalf("malformed records counted %d, want %d", bad, want)
	}
	if got := res.Counter("", "deadletter_malformed"); got != want {
		t.Fatalf("dead-letter path saw %d malformed records, want %d", got, want)
	}
}

func run(t *testing.T, q string, params ...string) (wftest.Result, []nexmark.Event) {
	t.Helper()
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	name := registerRecordQuery(t, q)
	recs, events := input()
	par := map[string]int{}
	switch q {
	case "q3":
		par["q3-join"] = 2
	case "q5":
		par["q5-window"] = 2
	}
	p := map[string]string{}
	for i := 0; i+1 < len(params); i += 2 {
		p[params[i]] = params[i+1]
	}
	res := wftest.RunQuery(t, wftest.Options{Query: name, Phases: []wftest.Phase{{Records: recs}}, Parallelism: par, Params: p})
	if res.Output == nil {
		t.Fatal("no output")
	}
	checkMalformed(t, q, res)
	return res, events
}

func check(t *testing.T, got []string, want []string) {
	t.Helper()
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatal("the oracle expects no output: the input is too small")
	}
	if d := wftest.Diff(got, want); d != "" {
		t.Fatal(d)
	}
	t.Logf("%d output records match the oracle", len(want))
}

func TestQ1(t *testing.T) {
	res, events := run(t, "q1")
	checkQ1(t, res.Output, events)
}

// checkQ1 compares q1's output with its oracle: every bid of events with
// the price in euros.
func checkQ1(t *testing.T, out []dataplane.Record, events []nexmark.Event) {
	t.Helper()
	var want []string
	for _, e := range events {
		if b := e.Bid; b != nil {
			want = append(want, fmt.Sprintf("%d=%d/%d/%d", b.Auction, b.Price*89/100, b.Bidder, b.DateTime))
		}
	}
	check(t, wftest.Lines(out, func(r dataplane.Record) string {
		e, err := nexmark.Parse(r.Value)
		if err != nil || e.Bid == nil || r.Value[0] == '{' {
			t.Fatalf("q1 output %x is not a binary bid: %v", r.Value, err)
		}
		return fmt.Sprintf("%d/%d/%d", e.Bid.Price, e.Bid.Bidder, e.Bid.DateTime)
	}), want)
}

func TestQ2(t *testing.T) {
	res, events := run(t, "q2")
	checkQ2(t, res.Output, events)
}

// checkQ2 compares q2's output with its oracle: the bids on auctions
// divisible by 123.
func checkQ2(t *testing.T, out []dataplane.Record, events []nexmark.Event) {
	t.Helper()
	var want []string
	for _, e := range events {
		if b := e.Bid; b != nil && b.Auction%123 == 0 {
			want = append(want, fmt.Sprintf("%d=%d/%d", b.Auction, b.Auction, b.Price))
		}
	}
	check(t, wftest.Lines(out, func(r dataplane.Record) string {
		v, err := nexmark.DecodeQ2Result(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d/%d", v.Auction, v.Price)
	}), want)
}

func TestQ3(t *testing.T) {
	res, events := run(t, "q3")
	checkQ3(t, res.Output, events)
}

// The person pad (DummyFieldSize) sizes q3's join state without changing
// its output; a pad beyond the bound fails the task's start.
func TestQ3PaddedPeople(t *testing.T) {
	res, events := run(t, "q3", control.ParamDummyFieldSize, "3000")
	checkQ3(t, res.Output, events)
	for _, r := range res.Output {
		if len(r.Value) > 200 {
			t.Fatalf("output %q carries the pad (%d bytes)", r.Key, len(r.Value))
		}
	}
}

// checkQ3 compares q3's output with its oracle: the category-10 auctions of
// sellers in OR, ID or CA.
func checkQ3(t *testing.T, out []dataplane.Record, events []nexmark.Event) {
	t.Helper()
	people := map[int64]*nexmark.Person{}
	for _, e := range events {
		if p := e.Person; p != nil && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
			people[p.ID] = p
		}
	}
	var want []string
	for _, e := range events {
		if a := e.Auction; a != nil && a.Category == 10 {
			if p := people[a.Seller]; p != nil {
				want = append(want, fmt.Sprintf("%d=%s|%s|%s|%d", a.Seller, p.Name, p.City, p.State, a.ID))
			}
		}
	}
	check(t, wftest.Lines(out, func(r dataplane.Record) string {
		v, err := nexmark.DecodeQ3Result(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s|%s|%s|%d", v.Name, v.City, v.State, v.Auction)
	}), want)
}

func TestQ5(t *testing.T) {
	res, events := run(t, "q5")
	checkQ5(t, res.Output, events)
}

// checkQ5 compares q5's output with its oracle: bids per auction in 10 s
// windows sliding by 2 s (events[i] is event number i).
func checkQ5(t *testing.T, out []dataplane.Record, events []nexmark.Event) {
	t.Helper()
	size, slide := int64(10*time.Second), int64(2*time.Second)
	counts := map[string]uint64{}
	for i, e := range events {
		if b := e.Bid; b != nil {
			ts := base + int64(i)*int64(time.Millisecond)
			for start := ts / slide * slide; start > ts-size; start -= slide {
				counts[fmt.Sprintf("%d@%d", b.Auction, (start+size)/int64(time.Millisecond))]++
			}
		}
	}
	var want []string
	for k, n := range counts {
		want = append(want, fmt.Sprintf("%s=%d", k, n))
	}
	check(t, wftest.Lines(out, func(r dataplane.Record) string {
		return fmt.Sprint(binary.LittleEndian.Uint64(r.Value))
	}), want)
}

// q7Window is the window size (ms) q7 runs with in the tests: 1 s windows
// instead of 10 s.
const q7Window = "1000"

func TestQ7(t *testing.T) {
	res, events := run(t, "q7", control.ParamWindowDuration, q7Window)
	checkQ7(t, res.Output, events)
}

// checkQ7 compares q7's output with its oracle: the highest bid of each
// 1 s window (events[i] is event number i).
func checkQ7(t *testing.T, out []dataplane.Record, events []nexmark.Event) {
	t.Helper()
	size := int64(time.Second)
	best := map[int64]*nexmark.Bid{}
	for i, e := range events {
		b := e.Bid
		if b == nil {
			continue
		}
		end := (base+int64(i)*int64(time.Millisecond))/size*size + size
		cur := best[end]
		if cur == nil || b.Price > cur.Price || b.Price == cur.Price && (b.Auction < cur.Auction || b.Auction == cur.Auction && b.Bidder < cur.Bidder) {
			best[end] = b
		}
	}
	var want []string
	for end, b := range best {
		ms := end / int64(time.Millisecond)
		want = append(want, fmt.Sprintf("max@%d=%+v", ms, nexmark.Q7Result{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, WindowEnd: ms}))
	}
	check(t, wftest.Lines(out, func(r dataplane.Record) string {
		v, err := nexmark.DecodeQ7Result(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%+v", v)
	}), want)
}

func TestParseRejectsMalformed(t *testing.T) {
	for _, m := range malformed {
		if _, err := nexmark.Parse(m); err == nil {
			t.Errorf("Parse(%s) accepted", m)
		}
	}
	g := testGenerator()
	for n := int64(0); n < 500; n++ {
		var r dataplane.Record
		g.Next(n, &r)
		e, err := nexmark.Parse(r.Value)
		if err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		if e.Kind() != nexmark.KindOf(n) {
			t.Fatalf("event %d is a %s, want a %s", n, e.Kind(), nexmark.KindOf(n))
		}
	}
}

// TestGenerator checks the mix, the sizes, determinism and the hot keys.
// The JSON stream has the reference sizes; the binary one (the default)
// carries the same events in a fraction of the bytes.
func TestGenerator(t *testing.T) {
	g := testGenerator()
	asJSON := mustGenerator(nexmark.Config{Seed: 42, Encoding: nexmark.JSON})
	kinds, sizes, jsonSizes := map[string]int{}, map[string]int{}, map[string]int{}
	auctions := map[int64]int{}
	for n := int64(0); n < 50000; n++ {
		var r, again, j dataplane.Record
		g.Next(n, &r)
		g.Next(n, &again)
		if string(r.Value) != string(again.Value) || r.EventTime != again.EventTime {
			t.Fatalf("event %d differs between two calls", n)
		}
		asJSON.Next(n, &j)
		e, err := nexmark.Parse(r.Value)
		if err != nil || r.Value[0] == '{' {
			t.Fatalf("event %d: not binary or not parsed: %v", n, err)
		}
		if je, err := nexmark.Parse(j.Value); err != nil || j.Value[0] != '{' || !reflect.DeepEqual(e, je) {
			t.Fatalf("event %d: JSON %s (%v) is not the binary event %+v", n, j.Value, err, e)
		}
		k := nexmark.KindOf(n)
		kinds[k]++
		sizes[k] += len(r.Value)
		jsonSizes[k] += len(j.Value)
		if e.Bid != nil {
			auctions[e.Bid.Auction]++
		}
	}
	if kinds["person"] != 1000 || kinds["auction"] != 3000 || kinds["bid"] != 46000 {
		t.Fatalf("mix %v, want 1:3:46", kinds)
	}
	for k, want := range map[string]int{"person": 200, "auction": 500, "bid": 100} {
		if avg := jsonSizes[k] / kinds[k]; avg < want*8/10 || avg > want*13/10 {
			t.Errorf("%s: average %d bytes of JSON, want about %d", k, avg, want)
		}
	}
	// Binary: a bid is its numbers and short strings (no padding: its
	// JSON is already above 100 bytes); people and auctions keep their
	// padding and lose the field names.
	for k, most := range map[string]int{"person": 120, "auction": 380, "bid": 30} {
		if avg := sizes[k] / kinds[k]; avg > most || avg >= jsonSizes[k]/kinds[k] {
			t.Errorf("%s: average %d binary bytes, want at most %d and less than JSON's %d", k, avg, most, jsonSizes[k]/kinds[k])
		}
	}
	t.Logf("average bytes binary/JSON: person %d/%d, auction %d/%d, bid %d/%d", sizes["person"]/1000, jsonSizes["person"]/1000,
		sizes["auction"]/3000, jsonSizes["auction"]/3000, sizes["bid"]/46000, jsonSizes["bid"]/46000)
	// Hot auctions: half the bids go to the hot auction of their batch, so
	// the busiest auction takes far more than a uniform share.
	top := 0
	for _, n := range auctions {
		top = max(top, n)
	}
	if top < 46000/len(auctions)*10 {
		t.Errorf("busiest auction has %d of 46000 bids over %d auctions: no hot auction", top, len(auctions))
	}
	other := mustGenerator(nexmark.Config{Seed: 43})
	var a, b dataplane.Record
	g.Next(7, &a)
	other.Next(7, &b)
	if string(a.Value) == string(b.Value) {
		t.Error("two seeds gave the same event")
	}
	resumed := mustGenerator(nexmark.Config{Seed: 42, OutputEventNumber: 1000})
	var c dataplane.Record
	resumed.Next(0, &c)
	g.Next(1000, &a)
	if string(a.Value) != string(c.Value) {
		t.Error("OutputEventNumber does not resume the stream")
	}
}

// BenchmarkGenerator reports generated (binary-encoded) events/s.
func BenchmarkGenerator(b *testing.B) { benchGenerator(b, testGenerator()) }

func benchGenerator(b *testing.B, g *nexmark.Generator) {
	var r dataplane.Record
	bytes := 0
	for i := 0; i < b.N; i++ {
		g.Next(int64(i), &r)
		bytes += len(r.Value)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.SetBytes(int64(bytes / max(b.N, 1)))
}

// BenchmarkGeneratorPersonsAuctions is BenchmarkGenerator on q3's input
// stream, people and auctions only: their names, descriptions and
// padding are mostly pseudo-random letters, so the letters' cost is most
// of a producer's CPU (a fifth of the old owner's worker in a q3 profile).
func BenchmarkGeneratorPersonsAuctions(b *testing.B) {
	benchGenerator(b, mustGenerator(nexmark.Config{Seed: 42, Kinds: []string{"person", "auction"}}))
}

// BenchmarkParse reports parsed events/s (the first step of every query).
func BenchmarkParse(b *testing.B) {
	g := testGenerator()
	vals := make([][]byte, 1000)
	for i := range vals {
		var r dataplane.Record
		g.Next(int64(i), &r)
		vals[i] = r.Value
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := nexmark.Parse(vals[i%len(vals)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
