package statesvc

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkListGivenAwayKeys: a task whose 100 K keys (100-byte values)
// are all buffered in its write-back cache lists the keys of half of its
// buckets (every other one, as a scale-out hands them over): by scans, as
// the handoff did, each of which writes every buffered write of the store
// to Pebble under the write lock first, or by one keys-only export. Each
// op rewrites the keys first (not timed), so every listing finds them
// buffered. max-read-ms and max-write-ms are the longest a read of a
// cached key and a one-key write of another goroutine (the task's
// batches) took meanwhile.
func BenchmarkListGivenAwayKeys(b *testing.B) {
	const keys, buckets = 100_000, 64
	for _, mode := range []string{"scan", "export-keys"} {
		b.Run(mode, func(b *testing.B) {
			p, err := OpenPebble(Options{Dir: filepath.Join(b.TempDir(), "db"), Volatile: true})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			kvs := make([]KV, keys)
			for i := range kvs {
				user := fmt.Appendf(nil, "key-%07d", i)
				kvs[i] = KV{Key: StateKey(nil, "op", BucketOf(user, buckets), "count", user), Value: binary.LittleEndian.AppendUint64(make([]byte, 0, 100), uint64(i))[:100]}
			}
			var ranges []KeyRange
			for bk := 1; bk < buckets; bk += 2 {
				s, e := BucketRange("op", bk, bk+1)
				ranges = append(ranges, KeyRange{Start: s, End: e})
			}
			listed := 0
			var readWait, writeWait float64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for i := 0; i < len(kvs); i += 1000 {
					if err := p.MultiPut(kvs[i:min(i+1000, len(kvs))]); err != nil {
						b.Fatal(err)
					}
				}
				// A task's batch path meanwhile, timing its waits: a read of a
				// cached key and a write of another.
				stop := make(chan struct{})
				waits := make(chan [2]float64, 1)
				go func() {
					var worst [2]float64
					hot := [][]byte{kvs[0].Key}
					one := []KV{{Key: []byte("other"), Value: []byte("v")}}
					for {
						select {
						case <-stop:
							waits <- worst
							return
						default:
						}
						start := time.Now()
						if _, err := p.MultiGet(hot); err != nil {
							b.Error(err)
						}
						mid := time.Now()
						if err := p.MultiPut(one); err != nil {
							b.Error(err)
						}
						worst[0] = max(worst[0], float64(mid.Sub(start).Microseconds())/1e3)
						worst[1] = max(worst[1], float64(time.Since(mid).Microseconds())/1e3)
					}
				}()
				b.StartTimer()
				listed = 0
				if mode == "scan" {
					for _, r := range ranges {
						if err := p.Scan(r.Start, r.End, func(_, _ []byte) bool { listed++; return true }); err != nil {
							b.Fatal(err)
						}
					}
				} else if err := p.ExportKeys(ranges, func([]byte) bool { listed++; return true }); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				close(stop)
				w := <-waits
				readWait, writeWait = max(readWait, w[0]), max(writeWait, w[1])
				b.StartTimer()
			}
			b.ReportMetric(float64(listed), "keys-listed")
			b.ReportMetric(readWait, "max-read-ms")
			b.ReportMetric(writeWait, "max-write-ms")
		})
	}
}
