package dataplane

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"koala/dataplane/control"
)

// End-to-end latency at the sink: each record's EventTime is the time the
// producer made it (it travels as the Kafka record timestamp), so now −
// EventTime at the sink is producer → sink latency. It is only meaningful for
// queries that pass records through; a window's output carries the window's
// event time instead.

const (
	latencyMaxUs   = int64(10 * time.Minute / time.Microsecond) // larger values are clamped
	latencySigFigs = 3
)

// sinkLatency is a sink task's HDR histogram of producer → sink latency in
// microseconds, over the task's lifetime.
type sinkLatency struct {
	mu      sync.Mutex
	h       *hdrhistogram.Histogram
	clamped uint64 // records older than latencyMaxUs, counted at the max
	future  uint64 // records stamped after now (clock skew), counted as 1 µs
}

func newSinkLatency() *sinkLatency {
	return &sinkLatency{h: hdrhistogram.New(1, latencyMaxUs, latencySigFigs)}
}

// observe records the latency of recs received at now. Records without an
// event time are skipped.
func (l *sinkLatency) observe(recs []Record, now time.Time) {
	ns := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range recs {
		et := recs[i].EventTime
		if et <= 0 {
			continue
		}
		us := (ns - et) / 1000
		switch {
		case us < 1:
			us = 1
			l.future++
		case us > latencyMaxUs:
			us = latencyMaxUs
			l.clamped++
		}
		// The value is within the histogram's range, so this cannot fail.
		_ = l.h.RecordValue(us)
	}
}

// snapshot returns the percentiles so far; nil before the first record.
func (l *sinkLatency) snapshot() *control.Latency {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.h.TotalCount()
	if n == 0 {
		return nil
	}
	return &control.Latency{
		Count: uint64(n), P50Us: l.h.ValueAtQuantile(50), P99Us: l.h.ValueAtQuantile(99),
		P999Us: l.h.ValueAtQuantile(99.9), MaxUs: l.h.Max(), Clamped: l.clamped, Future: l.future,
	}
}
