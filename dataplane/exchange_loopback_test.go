package dataplane

import (
	"context"
	"koala/dataplane/exchange"
	"koala/dataplane/wire"
	"sync"
	"testing"
	"time"
)

// TestExchangeLoopbackDeliversEachRecordOnce sends frames of benchRecords
// records with distinct offsets through the loopback exchange and checks
// that every record arrives exactly once, intact, with frames in the order
// they were sent.
func TestExchangeLoopbackDeliversEachRecordOnce(t *testing.T) {
	const frames = 200
	total := frames * benchRecords
	var mu sync.Mutex
	seen := make([]int, total)
	var bad []string
	lastFrame := int64(-1)
	all := make(chan struct{})
	got := 0
	l, err := exchange.StartLoopback(func(f *wire.Frame) {
		mu.Lock()
		defer mu.Unlock()
		if len(f.Records) == 0 {
			bad = append(bad, "empty frame")
			return
		}
		if first := f.Records[0].Offset / benchRecords; first <= lastFrame {
			bad = append(bad, "frame out of order")
		} else {
			lastFrame = first
		}
		for _, r := range f.Records {
			if r.Offset < 0 || r.Offset >= int64(total) || len(r.Key) != benchKeyLen || len(r.Value) != benchValueLen {
				bad = append(bad, "malformed record")
				continue
			}
			seen[r.Offset]++
			got++
		}
		if got == total {
			close(all)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := benchBatch()
	for i := 0; i < frames; i++ {
		recs := make([]Record, len(base))
		for j := range recs {
			recs[j] = base[j]
			recs[j].Offset = int64(i*benchRecords + j)
		}
		if err := l.Send(ctx, &wire.Frame{Kind: wire.FrameData, JobID: "j", FromTask: "a-0", ToTask: "b-0", Records: recs}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		_, n := l.Received()
		t.Fatalf("%d of %d records arrived within a minute", n, total)
	}
	nf, nr := l.Received()
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d problems, first: %s", len(bad), bad[0])
	}
	for off, c := range seen {
		if c != 1 {
			t.Fatalf("record at offset %d arrived %d times", off, c)
		}
	}
	if nf != frames || nr != uint64(total) {
		t.Errorf("Received() = %d frames, %d records; want %d, %d", nf, nr, frames, total)
	}
}

// BenchmarkExchange sends 1000-record data frames (16-byte keys, 80-byte
// values) from one peer stream to an exchange server over loopback gRPC
// and waits until the far side has received them all; one op is one frame.
//
//	go test -run '^$' -bench Exchange ./dataplane
func BenchmarkExchange(b *testing.B) {
	f := benchFrame()
	b.SetBytes(int64(len(wire.AppendFrame(nil, f))))
	var mu sync.Mutex
	want, got := uint64(0), uint64(0)
	done := make(chan struct{}, 1)
	l, err := exchange.StartLoopback(func(f *wire.Frame) {
		mu.Lock()
		got += uint64(len(f.Records))
		if want > 0 && got >= want {
			want = 0
			done <- struct{}{}
		}
		mu.Unlock()
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	mu.Lock()
	want = got + uint64(b.N*benchRecords)
	mu.Unlock()
	for i := 0; i < b.N; i++ {
		if err := l.Send(ctx, f); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("frames did not arrive within 5 minutes")
	}
	b.StopTimer()
	reportPerRecord(b)
	b.ReportMetric(float64(b.N*benchRecords)/b.Elapsed().Seconds(), "records/s")
}
