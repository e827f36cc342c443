package statesvc

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// BenchmarkPebbleCounterManyKeys is one task of the keyed counter over 10 M
// keys (the bench's counter-10m row): batches of 500 keys drawn uniformly
// from 5 M, most seen for the first time, each read and written back with
// an 8-byte count, on a task's (volatile) store. Nearly every write is a new
// key, so the value cache cannot absorb it: the cost is Pebble's, above all
// the memtable insert of a random key, which is why the memtable's size is
// among the variants. cpu-ns/key counts the whole process (flushes and
// compactions included).
func BenchmarkPebbleCounterManyKeys(b *testing.B) {
	const (
		space = 5_000_000
		batch = 500
	)
	for _, v := range []struct {
		name   string
		o      Options
		offRun int64 // offDirtyBytes (0: the default)
	}{
		{"defaults", Options{}, 0},
		{"offDirty=1MiB", Options{}, 1 << 20},
		{"offDirty=16MiB", Options{}, 16 << 20},
		{"memtable=4MiB", Options{MemTableBytes: 4 << 20}, 0},
		{"memtable=8MiB", Options{MemTableBytes: 8 << 20}, 0},
		{"memtable=16MiB", Options{MemTableBytes: 16 << 20}, 0},
		{"defaults,L0=4", Options{tune: func(po *pebble.Options) {
			po.L0CompactionThreshold, po.L0StopWritesThreshold = 4, 12
		}}, 0},
	} {
		b.Run(v.name, func(b *testing.B) {
			if v.offRun > 0 {
				defer func(n int64) { offDirtyBytes = n }(offDirtyBytes)
				offDirtyBytes = v.offRun
			}
			o := v.o
			o.Dir = b.TempDir()
			o.Volatile = true
			p, err := OpenPebble(o)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				b.StopTimer()
				_ = p.Close()
			}()
			rng := rand.New(rand.NewPCG(5, 6))
			keys := make([][]byte, batch)
			kvs := make([]KV, batch)
			seen := map[uint32]bool{}
			var uk [8]byte
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				clear(seen)
				for i := range keys {
					n := uint32(rng.IntN(space))
					for seen[n] {
						n = uint32(rng.IntN(space))
					}
					seen[n] = true
					binary.BigEndian.PutUint64(uk[:], uint64(n)*0x9e3779b97f4a7c15)
					keys[i] = StateKey(keys[i][:0], "counter", int(n%128), "count", uk[:])
				}
				vals, err := p.MultiGet(keys)
				if err != nil {
					b.Fatal(err)
				}
				for i, v := range vals {
					var c uint64
					if len(v) == 8 {
						c = binary.LittleEndian.Uint64(v)
					}
					kvs[i] = KV{append([]byte(nil), keys[i]...), binary.LittleEndian.AppendUint64(nil, c+1)}
				}
				if err := p.MultiPut(kvs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			n := float64(b.N * batch)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/key")
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/n, "cpu-ns/key")
		})
	}
}
