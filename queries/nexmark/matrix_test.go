package nexmark_test

import (
	"strconv"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/nexmark"
	"koala/workflows/wftest"
)

// bidsInput is the first n events of the bids-only stream (as the
// artifact's hello world produces it): q1 passes each of them to the sink
// once, so the sink ledger checks q1 runs. Each record is keyed by its
// bid's auction, not by its event number as the producer keys it: q1
// keys its output by auction, and the ledger judges order per (output key,
// source partition), which holds only when every record of an auction
// took one keyed path; keyed by event number, an auction's bids reach the
// sink from every q1-currency task, out of order without any rescale.
func bidsInput(n int64) ([]dataplane.Record, []nexmark.Event) {
	g := mustGenerator(nexmark.Config{Seed: 42, Kinds: []string{"bid"}})
	recs := make([]dataplane.Record, n)
	events := make([]nexmark.Event, n)
	for i := range n {
		g.Next(i, &recs[i])
		e := g.EventNumber(i)
		events[i] = g.Event(e, g.Timestamp(e))
		recs[i].Key = strconv.AppendInt(recs[i].Key[:0], events[i].Bid.Auction, 10)
	}
	return recs, events
}

// TestExactnessMatrix rescales one keyed operator of each Nexmark query out
// and back in while input flows, under every protocol, and checks the
// output against the query's oracle (and the sink ledger: no duplicates,
// every record once and in per-key order where the query's ledger checks
// them).
func TestExactnessMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	bids, bidEvents := bidsInput(numEvents)
	in, events := input()
	closing, _, closingEvs := closingInput(t)
	q8Evs, _ := q8Input()
	q6mod, q6modEvs := q6ModInput(t, numEvents)
	// Where the rescaled operator is not a parser, the parsers' malformed
	// counts survive the rescales.
	malformedToo := func(q string, check func(t *testing.T, out []dataplane.Record)) func(*testing.T, *wftest.Run, wftest.Result) {
		return func(t *testing.T, _ *wftest.Run, res wftest.Result) {
			checkMalformed(t, q, res)
			check(t, res.Output)
		}
	}
	cases := []wftest.MatrixCase{
		{Query: registerRecordQuery(t, "q1"), Operator: "q1-currency", Input: bids, Check: func(t *testing.T, _ *wftest.Run, res wftest.Result) {
			checkQ1(t, res.Output, bidEvents)
		}},
		{Query: registerRecordQuery(t, "q2"), Operator: "q2-filter", Input: in, Check: func(t *testing.T, _ *wftest.Run, res wftest.Result) {
			checkQ2(t, res.Output, events)
		}},
		{Query: registerRecordQuery(t, "q3"), Operator: "q3-join", Input: in, Check: malformedToo("q3", func(t *testing.T, out []dataplane.Record) {
			checkQ3(t, out, events)
		})},
		{Query: registerRecordQuery(t, "q4"), Operator: "q4-close", Parallelism: map[string]int{"q4-average": 2}, Input: closing,
			Check: malformedToo("q4", func(t *testing.T, out []dataplane.Record) { checkQ4(t, out, closingEvs) })},
		{Query: registerRecordQuery(t, "q5"), Operator: "q5-window", Input: in, Check: malformedToo("q5", func(t *testing.T, out []dataplane.Record) {
			checkQ5(t, out, events)
		})},
		{Query: registerRecordQuery(t, "q6"), Operator: "q6-average", Parallelism: map[string]int{"q6-close": 2}, Params: q6Params, Input: closing,
			Check: malformedToo("q6", func(t *testing.T, out []dataplane.Record) { checkQ6(t, out, closingEvs) })},
		{Query: registerRecordQuery(t, "q7"), Operator: "q7-window", Params: map[string]string{control.ParamWindowDuration: q7Window}, Input: in,
			Check: malformedToo("q7", func(t *testing.T, out []dataplane.Record) { checkQ7(t, out, events) })},
		{Query: registerRecordQuery(t, "q8"), Operator: "q8-join", Params: q8Params, Input: records(q8Evs, true),
			Check: malformedToo("q8", func(t *testing.T, out []dataplane.Record) { checkQ8(t, out, q8Evs) })},
		// q6 modified: one output per input keyed by seller, so the ledger
		// checks every record once and in per-seller order, and the oracle
		// each seller's sequence of averages; the pad moves with the state.
		{Query: registerQ6ModRecords(t), Operator: "statefulMapper", Params: map[string]string{control.ParamDummyFieldSize: "64"}, Input: q6mod,
			Check: func(t *testing.T, _ *wftest.Run, res wftest.Result) { checkQ6Mod(t, res.Output, q6modEvs) }},
	}
	wftest.RunMatrix(t, cases)
}
