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
