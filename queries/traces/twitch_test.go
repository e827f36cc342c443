package traces_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/traces"
	"koala/workflows/wftest"
)

// contrib is what one event adds to its stream: viewers (−1, 0, +1) and
// watch seconds.
type contrib struct{ delta, watch int64 }

// twitchOracle replays the sessions per user and returns each stream's
// contributions, one per event, in input order.
func twitchOracle(in []traces.ViewEvent) map[string][]contrib {
	open := map[string]map[string]int64{} // user → stream → since
	per := map[string][]contrib{}
	for _, e := range in {
		if open[e.User] == nil {
			open[e.User] = map[string]int64{}
		}
		since, watching := open[e.User][e.Stream]
		var c contrib
		switch typ := strings.ToUpper(e.Type); {
		case typ == "ENTER" && !watching:
			open[e.User][e.Stream] = e.Time
			c.delta = 1
		case typ == "LEAVE" && watching:
			delete(open[e.User], e.Stream)
			c = contrib{-1, max(0, e.Time-since)}
		}
		per[e.Stream] = append(per[e.Stream], c)
	}
	return per
}

// checkTwitch compares the sink output with the oracle. Per stream the
// order in which events of different users reach streamViewers is not
// fixed, so the check is order-free but complete: the stream's outputs
// number its events 1..N (streamViewers) and 1..N (streamSummary) once
// each; in streamViewers' order consecutive outputs differ by exactly one
// event's contribution, and those contributions are the oracle's; the
// peak is the largest viewer count. Viewers never go negative, which holds
// when each user's enter reaches streamViewers before the leave that
// closes it (per-key order).
func checkTwitch(t *testing.T, res wftest.Result, in []traces.ViewEvent) {
	t.Helper()
	per := twitchOracle(in)
	type out struct{ events, viewers, joins, leaves, watch, updates, peak int64 }
	got := map[string][]out{}
	for _, r := range res.Output {
		f := strings.Split(string(r.Value), ",")
		if len(f) != 7 {
			t.Fatalf("output %s=%s: want 7 fields", r.Key, r.Value)
		}
		v := make([]int64, 7)
		for i := range f {
			var err error
			if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
				t.Fatalf("output %s=%s: %v", r.Key, r.Value, err)
			}
		}
		got[string(r.Key)] = append(got[string(r.Key)], out{v[0], v[1], v[2], v[3], v[4], v[5], v[6]})
	}
	if len(got) != len(per) {
		t.Fatalf("output has %d streams, want %d", len(got), len(per))
	}
	total := 0
	for s, want := range per {
		outs := got[s]
		if len(outs) != len(want) {
			t.Fatalf("stream %s: %d outputs, want %d", s, len(outs), len(want))
		}
		slices.SortFunc(outs, func(a, b out) int { return int(a.events - b.events) })
		var updates []int64
		var prev out
		var seen []contrib
		maxViewers := int64(0)
		for i, o := range outs {
			if o.events != int64(i+1) {
				t.Fatalf("stream %s: streamViewers event numbers are not 1..%d once each (position %d has %d)", s, len(want), i, o.events)
			}
			c := contrib{o.viewers - prev.viewers, o.watch - prev.watch}
			joins, leaves := o.joins-prev.joins, o.leaves-prev.leaves
			if c.delta < -1 || c.delta > 1 || joins != b2i(c.delta == 1) || leaves != b2i(c.delta == -1) {
				t.Fatalf("stream %s: output %d (%+v after %+v) is not one event's change", s, i+1, o, prev)
			}
			if o.peak < o.viewers {
				t.Fatalf("stream %s: output %+v has a peak below its viewers", s, o)
			}
			if o.viewers < 0 {
				t.Fatalf("stream %s: output %+v has negative viewers: a leave overtook its enter", s, o)
			}
			seen = append(seen, c)
			updates = append(updates, o.updates)
			maxViewers = max(maxViewers, o.viewers)
			prev = o
		}
		slices.Sort(updates)
		for i, u := range updates {
			if u != int64(i+1) {
				t.Fatalf("stream %s: streamSummary update numbers are not 1..%d once each", s, len(want))
			}
		}
		for _, o := range outs {
			if o.updates == int64(len(outs)) && o.peak != maxViewers {
				t.Fatalf("stream %s: final peak %d, want %d", s, o.peak, maxViewers)
			}
		}
		cmp := func(a, b contrib) int {
			if a.delta != b.delta {
				return int(a.delta - b.delta)
			}
			return int(a.watch - b.watch)
		}
		w := slices.Clone(want)
		slices.SortFunc(w, cmp)
		slices.SortFunc(seen, cmp)
		if !slices.Equal(w, seen) {
			t.Fatalf("stream %s: contributions differ from the oracle's", s)
		}
		total += len(want)
	}
	t.Logf("%d outputs over %d streams match the oracle", total, len(per))
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func twitchInput(t testing.TB, n int) ([]dataplane.Record, []traces.ViewEvent) {
	g, err := traces.NewTwitchGenerator(control.ProduceRequest{NumKeys: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]traces.ViewEvent, n)
	for i := range events {
		events[i] = g.Event(int64(i))
	}
	return generate(t, traces.Twitch, 20, 3, n), events
}

var twitchPar = map[string]int{"userSessions": 2, "streamViewers": 2, "streamSummary": 2}

// twitchRescale is the operator twitch's rescale tests scale: the first,
// per-user sessions.
var twitchRescale = rescale{op: "userSessions", par: twitchPar}

// TestTwitchAcrossLazyRescale runs with the default 15 KB pad per stream
// and rescales the first operator (per-user sessions) 2→4.
func TestTwitchAcrossLazyRescale(t *testing.T) {
	recs, events := twitchInput(t, 6000)
	res := runRescaled(t, traces.Twitch, twitchRescale, nil, recs)
	checkTwitch(t, res, events)
}

// TestTwitchMiddleOperatorRescale rescales streamViewers, whose input
// comes from the keyed stateful userSessions, 2→4. Exactly-once delivery,
// the final per-stream state, every event's contribution and per-key order
// are checked strictly: a record an upstream sends straight to a new owner
// must not overtake an earlier record of its key that the old owner still
// forwards (which would show as a negative viewer count).
func TestTwitchMiddleOperatorRescale(t *testing.T) {
	recs, events := twitchInput(t, 6000)
	res := runRescaled(t, traces.Twitch, rescale{op: "streamViewers", par: twitchPar}, nil, recs)
	checkTwitch(t, res, events)
}

func TestTwitchFromCSV(t *testing.T) {
	_, gen := twitchInput(t, 3000)
	// Repeated enters, leaves without enter and lower-case types, which the
	// generator never makes.
	var events []traces.ViewEvent
	for i, e := range gen {
		events = append(events, e)
		switch {
		case i%400 == 7:
			events = append(events, e)
		case i%700 == 3:
			e.Type = strings.ToLower(e.Type)
			events = append(events, e)
		case i%900 == 11:
			e.Stream, e.Type = traces.TwitchStreamID(0), "LEAVE"
			events = append(events, e)
		}
	}
	good := make([][]byte, len(events))
	for i, e := range events {
		good[i] = e.CSV()
	}
	bad := []string{
		"u1,s1,streamer1,100",         // 4 columns
		"u1,s1,streamer1,later,ENTER", // time not a number
		",s1,streamer1,100,ENTER",     // no user
		"u1,s1,streamer1,100,WATCH",   // unknown type
		"u1,,streamer1,100,LEAVE",     // no stream
	}
	recs := csvInput(t, traces.Twitch, "user_id,stream_id,streamer_name,time,event_type", good, bad)
	recs, injected := injectBad(recs, []dataplane.Record{{Key: []byte("u00000001"), Value: []byte("u00000002,s1,x,1,ENTER")}})
	res := run(t, traces.Twitch, twitchPar, map[string]string{control.ParamDummyFieldSize: "512"}, recs)
	if n := res.Counter("userSessions", "malformed_records"); n != uint64(injected) {
		t.Fatalf("userSessions counted %d malformed records, want %d", n, injected)
	}
	checkTwitch(t, res, events)
}

func BenchmarkTwitch(b *testing.B) { benchQuery(b, traces.Twitch, 1000, nil) }
