package dataplane

import (
	"testing"
	"time"
)

func TestSinkLatency(t *testing.T) {
	l := newSinkLatency()
	if s := l.snapshot(); s != nil {
		t.Fatalf("empty histogram: %+v", s)
	}
	now := time.Unix(1_764_000_000, 0)
	recs := make([]Record, 0, 1002)
	// 1000 records 1..1000 ms old: p50 ≈ 500 ms, p99 ≈ 990 ms, max 1 s.
	for i := 1; i <= 1000; i++ {
		recs = append(recs, Record{EventTime: now.Add(-time.Duration(i) * time.Millisecond).UnixNano()})
	}
	recs = append(recs, Record{}, Record{EventTime: now.Add(time.Second).UnixNano()}) // no time; from the future
	l.observe(recs, now)
	s := l.snapshot()
	if s == nil || s.Count != 1001 || s.Future != 1 || s.Clamped != 0 {
		t.Fatalf("snapshot: %+v", s)
	}
	within := func(name string, got, want int64) {
		if d := float64(got-want) / float64(want); d < -0.01 || d > 0.01 {
			t.Errorf("%s = %d µs, want %d ± 1 %%", name, got, want)
		}
	}
	within("p50", s.P50Us, 500_000)
	within("p99", s.P99Us, 990_000)
	within("max", s.MaxUs, 1_000_000)
	l.observe([]Record{{EventTime: now.Add(-time.Hour).UnixNano()}}, now)
	if s := l.snapshot(); s.Clamped != 1 || s.MaxUs < latencyMaxUs*99/100 {
		t.Errorf("an hour-old record: %+v", s)
	}
}
