package nexmark_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/nexmark"
	"koala/workflows"
	"koala/workflows/wftest"
)

// Oracle tests of q4, q6* and q8: the generated stream plus hand-made
// events on the boundaries (a bid at an auction's expiry, a bid before its
// auction, a person and auctions on both sides of a window end), then,
// once the watermark passed them, late events that would change the result
// if they were not dropped. The expected output is computed here from the
// events with plain Go.

const ms = int64(time.Millisecond)

// timed is one input event and its event time (ns).
type timed struct {
	e  nexmark.Event
	ts int64
}

// record is ev as an external input file gives it: JSON, so the closing
// queries are checked on JSON input and the others (input()) on the
// generator's binary records.
func record(key string, ev timed) dataplane.Record {
	data, err := json.Marshal(ev.e)
	if err != nil {
		panic(err)
	}
	return dataplane.Record{Key: []byte(key), Value: data, EventTime: ev.ts}
}

// stream is the generated events with extra merged in by event time
// (stable: an extra event goes after the generated ones of its instant).
func stream(extra []timed) []timed {
	g := testGenerator()
	var out []timed
	for n := int64(0); n < numEvents; n++ {
		out = append(out, timed{g.Event(n, g.Timestamp(n)), g.Timestamp(n)})
	}
	out = append(out, extra...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ts < out[j].ts })
	return out
}

func records(evs []timed, withMalformed bool) []dataplane.Record {
	var recs []dataplane.Record
	for i, ev := range evs {
		recs = append(recs, record(strconv.Itoa(i), ev))
		if bad, ok := malformedAfter(i); ok && withMalformed {
			recs = append(recs, dataplane.Record{Key: []byte("bad"), Value: bad, EventTime: ev.ts})
		}
	}
	return recs
}

func bidAt(auction, price, bidder, atMs int64) timed {
	return timed{nexmark.Event{Bid: &nexmark.Bid{Auction: auction, Bidder: bidder, Price: price, Channel: "x", URL: "n.io/x", DateTime: atMs}}, atMs * ms}
}

// findAuction returns the first generated auction created at or after atMs.
func findAuction(t *testing.T, atMs int64) nexmark.Auction {
	g := testGenerator()
	for n := int64(0); n < numEvents; n++ {
		if e := g.Event(n, g.Timestamp(n)); e.Auction != nil && e.Auction.DateTime >= atMs {
			return *e.Auction
		}
	}
	t.Fatalf("no auction at or after %d", atMs)
	return nexmark.Auction{}
}

// lateRun runs query q over in, waits until every task of lateOp has a
// watermark ≥ lateAfter, produces late (which must all be dropped as late
// by lateOp), and returns the output. rescale, when set, runs a lazy
// scale-out of that operator to 4 tasks halfway through in.
func lateRun(t *testing.T, q, lateOp string, in, late []dataplane.Record, lateAfter int64, rescale string, par map[string]int, params map[string]string) wftest.Result {
	t.Helper()
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	name := registerRecordQuery(t, q)
	wmAtLeast := func(op string, ts int64) func(r *wftest.Run) bool {
		return func(r *wftest.Run) bool {
			n := 0
			for task, wm := range r.Watermarks() {
				if len(task) > len(op) && task[:len(op)+1] == op+"-" {
					if wm < ts {
						return false
					}
					n++
				}
			}
			return n > 0
		}
	}
	half := len(in) / 2
	phases := []wftest.Phase{{Records: in[:half]}, {Records: in[half:], Until: wmAtLeast(lateOp, lateAfter)}, {Records: late}}
	if rescale != "" {
		// Rescale once the first half is being closed: its first auctions
		// expired, later ones are pending in state and move.
		phases[0].Until = wmAtLeast(rescale, in[0].EventTime+int64(8*time.Second))
		phases[0].Then = func(r *wftest.Run) { r.Rescale(workflows.ReconfigureLazy, rescale, 4) }
	}
	res := wftest.RunQuery(t, wftest.Options{Query: name, Phases: phases, Parallelism: par, Params: params, Backend: "pebble", Workers: 3})
	if n := res.Counter(lateOp, "late_records"); n != uint64(len(late)) {
		t.Fatalf("%s counted %d late records, want %d", lateOp, n, len(late))
	}
	var bad uint64
	for _, cs := range res.Counters {
		bad += cs["malformed_records"]
	}
	if bad == 0 {
		t.Fatal("no malformed record was counted: the input lost them")
	}
	return res
}

// winners computes the closed auctions with a winning bid: bids with
// reserve ≤ price and dateTime ≤ bid < expires; the highest price wins,
// ties to the lower bidder.
func winners(evs []timed) []nexmark.Closed {
	auctions := map[int64]*nexmark.Auction{}
	for _, ev := range evs {
		if a := ev.e.Auction; a != nil {
			auctions[a.ID] = a
		}
	}
	best := map[int64]*nexmark.Bid{}
	for _, ev := range evs {
		b := ev.e.Bid
		if b == nil {
			continue
		}
		a := auctions[b.Auction]
		if a == nil || b.Price < a.Reserve || b.DateTime < a.DateTime || b.DateTime >= a.Expires {
			continue
		}
		if cur := best[a.ID]; cur == nil || b.Price > cur.Price || b.Price == cur.Price && b.Bidder < cur.Bidder {
			best[a.ID] = b
		}
	}
	var out []nexmark.Closed
	for id, b := range best {
		a := auctions[id]
		out = append(out, nexmark.Closed{Auction: id, Category: a.Category, Seller: a.Seller, Price: b.Price, Expires: a.Expires})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Auction < out[j].Auction })
	return out
}

// closingInput is the q4/q6 input: generated events, boundary bids on two
// auctions and late bids/auctions for after the watermark passed 18 s.
func closingInput(t *testing.T) (in, late []dataplane.Record, evs []timed) {
	baseMs := base / ms
	a := findAuction(t, baseMs+3000)
	b := findAuction(t, baseMs+4000)
	extra := []timed{
		bidAt(a.ID, 9_000_000_000, 1, a.Expires-1),  // last valid instant: wins
		bidAt(a.ID, 9_500_000_000, 2, a.Expires),    // at expiry: invalid
		bidAt(b.ID, 8_000_000_000, 3, b.DateTime),   // first valid instant: wins
		bidAt(b.ID, 8_500_000_000, 4, b.DateTime-1), // before the auction (arrives first): invalid
	}
	evs = stream(extra)
	open := findAuction(t, baseMs+12000) // still open when the late events come
	lateEvs := []timed{
		bidAt(open.ID, 9_900_000_000, 5, baseMs+15000),
		{nexmark.Event{Auction: &nexmark.Auction{ID: 999_999, ItemName: "late", Reserve: 1, InitialBid: 1, DateTime: baseMs + 16000, Expires: baseMs + 26000, Seller: 1000, Category: 10}}, (baseMs + 16000) * ms},
		bidAt(999_999, 9_900_000_000, 6, baseMs+16001),
	}
	for i, ev := range lateEvs {
		late = append(late, record(fmt.Sprintf("late-%d", i), ev))
	}
	return records(evs, true), late, evs
}

// checkRunning checks a running aggregate's output: per key, one record
// for each of the closings 1..n (none lost, none twice), and the last one
// equal to want. closed decodes a record: its key, closing number and
// result as text.
func checkRunning(t *testing.T, out []dataplane.Record, closed func(dataplane.Record) (key string, n int64, result string), counts map[string]int64, want map[string]string) {
	t.Helper()
	seen := map[string]map[int64]bool{}
	last := map[string]string{}
	for _, r := range out {
		k, n, result := closed(r)
		if seen[k] == nil {
			seen[k] = map[int64]bool{}
		}
		if seen[k][n] {
			t.Fatalf("key %s: closing %d emitted twice", k, n)
		}
		seen[k][n] = true
		if n == counts[k] {
			last[k] = result
		}
	}
	if len(want) == 0 {
		t.Fatal("the oracle expects no output: the input is too small")
	}
	total := 0
	for k, n := range counts {
		if int64(len(seen[k])) != n {
			t.Errorf("key %s: %d closings emitted, want %d", k, len(seen[k]), n)
		}
		if last[k] != want[k] {
			t.Errorf("key %s: final result %s, want %s", k, last[k], want[k])
		}
		total += int(n)
	}
	if len(seen) != len(counts) {
		t.Errorf("%d keys in the output, want %d", len(seen), len(counts))
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d keys, %d results match the oracle", len(counts), total)
}

func testQ4(t *testing.T, rescale string) {
	in, late, evs := closingInput(t)
	res := lateRun(t, "q4", "q4-close", in, late, base+18*int64(time.Second), rescale, map[string]int{"q4-close": 2, "q4-average": 2}, nil)
	checkQ4(t, res.Output, evs)
}

// checkQ4 compares q4's running output with its oracle computed from evs:
// per category, one result per closed auction, the last one the average of
// all its winning prices.
func checkQ4(t *testing.T, out []dataplane.Record, evs []timed) {
	t.Helper()
	sum, counts := map[string]int64{}, map[string]int64{}
	for _, c := range winners(evs) {
		k := strconv.FormatInt(c.Category, 10)
		sum[k] += c.Price
		counts[k]++
	}
	want := map[string]string{}
	for k, n := range counts {
		cat, _ := strconv.ParseInt(k, 10, 64)
		want[k] = fmt.Sprintf("%+v", nexmark.Q4Result{Category: cat, Average: float64(sum[k]) / float64(n), Closed: n})
	}
	checkRunning(t, out, func(r dataplane.Record) (string, int64, string) {
		v, err := nexmark.DecodeQ4Result(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return string(r.Key), v.Closed, fmt.Sprintf("%+v", v)
	}, counts, want)
}

func TestQ4(t *testing.T) { testQ4(t, "") }

// TestQ4AcrossLazyScaleOut scales the closing operator out while auctions
// are open: their timers must fire on the keys' new owners.
func TestQ4AcrossLazyScaleOut(t *testing.T) { testQ4(t, "q4-close") }

// q6Params are q6*'s job parameters in the tests: 100-byte pads.
var q6Params = map[string]string{control.ParamDummyFieldSize: "100"}

func TestQ6(t *testing.T) {
	in, late, evs := closingInput(t)
	res := lateRun(t, "q6", "q6-close", in, late, base+18*int64(time.Second), "", map[string]int{"q6-close": 2, "q6-average": 2}, q6Params)
	checkQ6(t, res.Output, evs)
}

// checkQ6 compares q6*'s running output with its oracle computed from evs.
func checkQ6(t *testing.T, out []dataplane.Record, evs []timed) {
	t.Helper()
	counts, want := q6Oracle(winners(evs))
	manyClosings := false
	for _, n := range counts {
		manyClosings = manyClosings || n > nexmark.Q6Keep
	}
	if !manyClosings {
		t.Fatal("no seller closes more than the kept number of auctions: the input does not test the trimming")
	}
	checkQ6Output(t, out, counts, want)
}

// q8Params are q8's job parameters in the tests: 1 s windows.
var q8Params = map[string]string{control.ParamWindowDuration: "1000"}

// q8Edge and q8Late are the sellers of q8Input's hand-made events.
const q8Edge, q8Late = 900_000, 900_001

// q8Input is q8's input: the generated events plus a person and auctions on
// both sides of a window end, and late events for after the watermark
// passed 18 s.
func q8Input() (evs []timed, late []dataplane.Record) {
	baseMs := base / ms
	person := func(id, atMs int64) timed {
		return timed{nexmark.Event{Person: &nexmark.Person{ID: id, Name: fmt.Sprintf("Edge %d", id), EmailAddress: "e@x.com", CreditCard: "1", City: "Bend", State: "OR", DateTime: atMs}}, atMs * ms}
	}
	auction := func(id, seller, atMs int64) timed {
		return timed{nexmark.Event{Auction: &nexmark.Auction{ID: id, ItemName: "x", Reserve: 1, InitialBid: 1, DateTime: atMs, Expires: atMs + 10000, Seller: seller, Category: 10}}, atMs * ms}
	}
	evs = stream([]timed{
		person(q8Edge, baseMs+2999),
		auction(800_000, q8Edge, baseMs+2999), // same 1 s window: joins
		auction(800_001, q8Edge, baseMs+3000), // next window: does not
	})
	lateEvs := []timed{person(q8Late, baseMs+17500), auction(800_002, q8Late, baseMs+17500)}
	for i, ev := range lateEvs {
		late = append(late, record(fmt.Sprintf("late-%d", i), ev))
	}
	return evs, late
}

func TestQ8(t *testing.T) {
	evs, late := q8Input()
	res := lateRun(t, "q8", "q8-join", records(evs, true), late, base+18*int64(time.Second), "",
		map[string]int{"q8-join": 2}, q8Params)
	checkQ8(t, res.Output, evs)
}

// checkQ8 compares q8's output with its oracle computed from evs: each
// auction joined with its seller when both came in the same 1 s window.
func checkQ8(t *testing.T, out []dataplane.Record, evs []timed) {
	t.Helper()
	size := int64(time.Second)
	people := map[int64]timed{}
	for _, ev := range evs {
		if p := ev.e.Person; p != nil {
			people[p.ID] = ev
		}
	}
	var want []string
	edgeJoins := 0
	for _, ev := range evs {
		a := ev.e.Auction
		if a == nil {
			continue
		}
		p, ok := people[a.Seller]
		if !ok || p.ts/size != ev.ts/size {
			continue
		}
		if a.Seller == q8Edge {
			edgeJoins++
		}
		want = append(want, fmt.Sprintf("%d=%d|%s|%d|%d", a.Seller, a.Seller, p.e.Person.Name, ev.ts/size*size/ms, a.ID))
	}
	if edgeJoins != 1 {
		t.Fatalf("oracle: the edge person joins %d auctions, want 1", edgeJoins)
	}
	check(t, wftest.Lines(out, func(r dataplane.Record) string {
		v, err := nexmark.DecodeQ8Result(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d|%s|%d|%d", v.ID, v.Name, v.WindowStart, v.Auction)
	}), want)
}

// q6Oracle is q6*'s expected output per seller, computed from the closed
// auctions: how many closed, and the last result (average of the last
// Q6Keep prices in expiry order).
func q6Oracle(closed []nexmark.Closed) (counts map[string]int64, want map[string]string) {
	bySeller := map[string][]nexmark.Closed{}
	for _, c := range closed {
		k := strconv.FormatInt(c.Seller, 10)
		bySeller[k] = append(bySeller[k], c)
	}
	counts, want = map[string]int64{}, map[string]string{}
	for k, cs := range bySeller {
		sort.Slice(cs, func(i, j int) bool {
			return cs[i].Expires < cs[j].Expires || cs[i].Expires == cs[j].Expires && cs[i].Auction < cs[j].Auction
		})
		kept := cs[max(0, len(cs)-nexmark.Q6Keep):]
		var sum int64
		for _, c := range kept {
			sum += c.Price
		}
		counts[k] = int64(len(cs))
		want[k] = fmt.Sprintf("%+v", nexmark.Q6Result{Seller: cs[0].Seller, Average: float64(sum) / float64(len(kept)), Kept: len(kept), Closed: int64(len(cs))})
	}
	return counts, want
}

// checkQ6Output compares q6*'s running output with the oracle.
func checkQ6Output(t *testing.T, out []dataplane.Record, counts map[string]int64, want map[string]string) {
	t.Helper()
	checkRunning(t, out, func(r dataplane.Record) (string, int64, string) {
		v, err := nexmark.DecodeQ6Result(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return string(r.Key), v.Closed, fmt.Sprintf("%+v", v)
	}, counts, want)
}
