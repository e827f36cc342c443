package nexmark_test

import (
	"fmt"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/nexmark"
	"koala/workflows/wftest"
)

// End-to-end benchmarks of the query families q4/q6* (keyed stateful with
// timers) and q8 (windowed join): b.N generated events (100 µs of event
// time apart, auctions open for 1 s) go through the query on an in-process
// cluster (kfake Kafka, two workers, Pebble state), from producing the
// input to draining the output. The cluster start is not timed. Run with a
// fixed count, e.g.
//
//	go test -run '^$' -bench 'Nexmark' -benchtime 50000x ./queries/nexmark
func benchQuery(b *testing.B, q string, par map[string]int, params map[string]string) {
	name := registerRecordQuery(b, q)
	g, err := nexmark.NewGenerator(nexmark.Config{Seed: 3, BaseTime: base, InterEventNanos: int64(100 * time.Microsecond), AuctionLength: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]dataplane.Record, b.N)
	for i := range recs {
		g.Next(int64(i), &recs[i])
	}
	b.StopTimer()
	r := wftest.Start(b, wftest.Options{Query: name, JobID: fmt.Sprintf("bench-%s-%d", q, b.N), Phases: []wftest.Phase{{Records: recs}},
		Parallelism: par, Params: params, Backend: "pebble", BatchSize: 500, Timeout: 10 * time.Minute})
	b.StartTimer()
	start := time.Now()
	res := r.Run()
	elapsed := time.Since(start)
	b.StopTimer()
	if res.Output == nil && b.N > 100000 {
		b.Fatal("no output")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(len(res.Output)), "results")
}

// codecRecords are a generated bid and closed auction (no padding), the
// records of q1 and q6 modified.
func codecRecords(b *testing.B) map[string]nexmark.Event {
	out := map[string]nexmark.Event{}
	for name, cfg := range map[string]nexmark.Config{"bid": {Kinds: []string{"bid"}}, "closedauction": {Kinds: []string{"ClosedAuction"}}} {
		cfg.Seed, cfg.BaseTime = 3, base
		g, err := nexmark.NewGenerator(cfg)
		if err != nil {
			b.Fatal(err)
		}
		e := g.EventNumber(1234)
		out[name] = g.Event(e, g.Timestamp(e))
	}
	return out
}

var encodings = []nexmark.Encoding{nexmark.JSON, nexmark.Binary}

// BenchmarkEncode compares the encodings of a bid and of a closed
// auction: time and allocations per record, and its size.
//
//	go test -run '^$' -bench 'Encode|Decode' -benchmem ./queries/nexmark
func BenchmarkEncode(b *testing.B) {
	for name, ev := range codecRecords(b) {
		for _, enc := range encodings {
			b.Run(name+"/"+string(enc), func(b *testing.B) {
				b.ReportAllocs()
				var buf []byte
				var err error
				for b.Loop() {
					if buf, err = nexmark.AppendEvent(buf[:0], ev, enc); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(buf)), "bytes/record")
			})
		}
	}
}

// BenchmarkDecode compares Parse on the two encodings of a bid and of a
// closed auction.
func BenchmarkDecode(b *testing.B) {
	for name, ev := range codecRecords(b) {
		for _, enc := range encodings {
			b.Run(name+"/"+string(enc), func(b *testing.B) {
				data, err := nexmark.AppendEvent(nil, ev, enc)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := nexmark.Parse(data); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(data)), "bytes/record")
			})
		}
	}
}

// BenchmarkNexmarkQ4 is the keyed stateful family with timers: auctions
// closing and a running average per category.
func BenchmarkNexmarkQ4(b *testing.B) {
	benchQuery(b, "q4", map[string]int{"q4-close": 2}, nil)
}

// BenchmarkNexmarkQ6 is q6* with 100-byte pads: list state per seller.
func BenchmarkNexmarkQ6(b *testing.B) {
	benchQuery(b, "q6", map[string]int{"q6-close": 2, "q6-average": 2}, map[string]string{control.ParamDummyFieldSize: "100"})
}

// BenchmarkNexmarkQ8 is the windowed join family: people ⋈ auctions in 1 s
// windows.
func BenchmarkNexmarkQ8(b *testing.B) {
	benchQuery(b, "q8", map[string]int{"q8-join": 2}, map[string]string{control.ParamWindowDuration: "1000"})
}
