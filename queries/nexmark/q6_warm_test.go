package nexmark_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/nexmark"
	"koala/workflows"
	"koala/workflows/wftest"
)

// TestQ6WarmSellersAcrossLazyScaleOut runs q6* the way section 5.4 does:
// a sequential-seller closing-auction stream builds one price list per
// seller, q6-average scales out 2 → 4 lazily, and a uniform stream over
// some of those sellers resumes at the artifact's OutputEventNumber (46 ×
// the warm-up's events). Every result must match the oracle computed from
// the generated events, so the warm lists the active sellers continue
// (closing counts and prices) must have moved with their keys.
func TestQ6WarmSellersAcrossLazyScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const warmEvents, active, measured = 2000, 200, 3000
	gen := func(cfg nexmark.Config, n int64) []timed {
		g := mustGenerator(cfg)
		out := make([]timed, 0, n)
		for i := int64(0); i < n; i++ {
			e := g.EventNumber(i)
			out = append(out, timed{g.Event(e, g.Timestamp(e)), g.Timestamp(e)})
		}
		return out
	}
	warm := gen(nexmark.Config{Seed: 5, Sellers: nexmark.SellersSequential}, warmEvents)
	meas := gen(nexmark.Config{Seed: 5, Sellers: nexmark.SellersUniform, NumActivePeople: active, OutputEventNumber: 46 * warmEvents}, measured)
	// Bids on an auction that never comes, on every partition, move the
	// watermark past the last auction's expiry; they are evicted unseen.
	end := meas[len(meas)-1].ts + int64(10*time.Second)
	var sentinel []dataplane.Record
	for i := range 64 {
		sentinel = append(sentinel, record("end-"+strconv.Itoa(i), bidAt(1, 1, 1, end/ms)))
		sentinel[i].EventTime = end
	}

	toRecords := func(evs []timed, prefix string) []dataplane.Record {
		var out []dataplane.Record
		for i, ev := range evs {
			out = append(out, record(prefix+strconv.Itoa(i), ev))
		}
		return out
	}
	q6AverageWM := func(at int64) func(r *wftest.Run) bool {
		return func(r *wftest.Run) bool {
			n := 0
			for task, wm := range r.Watermarks() {
				if strings.HasPrefix(task, "q6-average-") {
					if wm < at {
						return false
					}
					n++
				}
			}
			return n > 0
		}
	}
	name := registerRecordQuery(t, "q6")
	res := wftest.RunQuery(t, wftest.Options{
		Query: name, Backend: "pebble", Workers: 3,
		Parallelism: map[string]int{"q6-close": 2, "q6-average": 2},
		Params:      map[string]string{control.ParamDummyFieldSize: "64"},
		Phases: []wftest.Phase{
			{Records: toRecords(warm, "w"), Until: q6AverageWM(warm[len(warm)/2].ts), Then: func(r *wftest.Run) {
				r.Rescale(workflows.ReconfigureLazy, "q6-average", 4)
			}},
			{Records: toRecords(meas, "m")},
			{Records: sentinel},
		},
	})

	all := append(append([]timed(nil), warm...), meas...)
	if len(winners(all)) != (warmEvents+measured)/2 {
		t.Fatalf("%d auctions close with a winner, want every one of %d", len(winners(all)), (warmEvents+measured)/2)
	}
	counts, want := q6Oracle(winners(all))
	continued := 0
	for _, n := range counts {
		if n > 1 {
			continued++
		}
	}
	if len(counts) != warmEvents/2 || continued < active*9/10 {
		t.Fatalf("%d sellers, %d with warm state and later closings: the input does not exercise the warm state", len(counts), continued)
	}
	checkQ6Output(t, res.Output, counts, want)
}
