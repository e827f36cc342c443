package metrics

import (
	"sync"
	"testing"
	"time"
)

// within reports whether got is v to the histograms' 3 significant digits.
func within(got, v int64) bool {
	d := got - v
	if d < 0 {
		d = -d
	}
	return d*1000 <= v
}

func TestBatchHistPercentiles(t *testing.T) {
	var b BatchHist
	if enc, err := b.Take(); err != nil || enc != "" {
		t.Fatalf("empty take = %q, %v", enc, err)
	}
	// 98 batches of 1 ms, one of 50 ms and one of 900 ms: p50 1 ms,
	// p99 50 ms, max 900 ms.
	for range 98 {
		b.Observe(time.Millisecond)
	}
	b.Observe(50 * time.Millisecond)
	b.Observe(900 * time.Millisecond)
	first, err := b.Take()
	if err != nil || first == "" {
		t.Fatalf("take = %q, %v", first, err)
	}
	if again, err := b.Take(); err != nil || again != "" {
		t.Fatalf("take after take = %q, %v; want an empty interval", again, err)
	}
	// Out of range values are clamped, not dropped.
	b.Observe(0)
	b.Observe(time.Hour)
	second, err := b.Take()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		enc           []string
		n             uint64
		p50, p99, max int64
	}{
		{"first interval", []string{first}, 100, 1000, 50_000, 900_000},
		{"with the clamped ones", []string{first, "", second}, 102, 1000, 900_000, BatchHistMaxUs},
		{"clamped only", []string{second}, 2, 1, BatchHistMaxUs, BatchHistMaxUs},
	} {
		p, ok, err := MergeBatchHists(c.enc)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", c.name, ok, err)
		}
		if p.Count != c.n || !within(p.P50Us, c.p50) || !within(p.P99Us, c.p99) || !within(p.MaxUs, c.max) {
			t.Errorf("%s: %+v, want n=%d p50≈%d p99≈%d max≈%d", c.name, p, c.n, c.p50, c.p99, c.max)
		}
	}
	if _, ok, err := MergeBatchHists([]string{"", ""}); ok || err != nil {
		t.Errorf("no histograms: ok=%v err=%v", ok, err)
	}
	if _, _, err := MergeBatchHists([]string{"not base64!"}); err == nil {
		t.Error("a corrupt histogram was accepted")
	}
}

// TestBatchHistConcurrentTake records from one goroutine while another
// takes intervals: every batch lands in exactly one interval.
func TestBatchHistConcurrentTake(t *testing.T) {
	var b BatchHist
	const n = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			b.Observe(time.Duration(1+i%500) * time.Microsecond)
		}
	}()
	var encs []string
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		default:
		}
		enc, err := b.Take()
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, enc)
	}
	p, ok, err := MergeBatchHists(encs)
	if err != nil || !ok || p.Count != n {
		t.Fatalf("merged %d intervals: %+v ok=%v err=%v, want %d batches", len(encs), p, ok, err, n)
	}
}

func TestBatchHistWindow(t *testing.T) {
	enc := func(d time.Duration) string {
		var b BatchHist
		b.Observe(d)
		s, err := b.Take()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	samples := []BatchHistSample{
		{Task: "a", Sec: 4, Hist: enc(100 * time.Millisecond)}, // before the window
		{Task: "a", Sec: 5, Hist: enc(time.Millisecond)},
		{Task: "b", Sec: 6, Hist: enc(2 * time.Millisecond)},
		{Task: "a", Sec: 7, Hist: enc(3 * time.Millisecond)},
		{Task: "b", Sec: 8, Hist: enc(200 * time.Millisecond)}, // second [8, 9) is not wholly inside [5, 8.5)
	}
	p, ok, err := BatchHistWindow(samples, 5, 8.5)
	if err != nil || !ok || p.Count != 3 || !within(p.P50Us, 2000) || !within(p.MaxUs, 3000) {
		t.Fatalf("window: %+v ok=%v err=%v", p, ok, err)
	}
	if _, ok, _ := BatchHistWindow(samples, 20, 30); ok {
		t.Error("an empty window reported percentiles")
	}
}
