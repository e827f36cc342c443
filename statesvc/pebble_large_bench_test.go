package statesvc

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Large state: the q6* shape (one 2136-byte value per key, pseudo-random so
// nothing compresses) with the state tens of times the block cache, so
// reads go past every cache in the process. The point of the benchmark is
// which MultiGet path and which Pebble options keep a stateful batch cheap
// there; BenchmarkPebbleMultiGetVariants covers small, mostly cached state.
const (
	largeBenchKeys   = 250_000
	largeBenchValue  = 2136
	largeBenchBatch  = 256
	largeBenchCacheB = 16 << 20 // block cache: state / 33, as 2.3 GB over 64 MiB
)

func openLargeBench(b *testing.B, o Options) (*Pebble, [][]byte) {
	b.Helper()
	o.Dir = b.TempDir()
	o.Volatile = true
	p, err := OpenPebble(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	pool := benchStateKeys(largeBenchKeys)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < len(pool); i += 2000 {
		var kvs []KV
		for _, k := range pool[i:min(i+2000, len(pool))] {
			kvs = append(kvs, KV{k, randomLargeValue(rng)})
		}
		if err := p.MultiPut(kvs); err != nil {
			b.Fatal(err)
		}
	}
	waitCompactions(b, p)
	return p, pool
}

// randomLargeValue is a q6*-sized value of pseudo-random bytes, so
// nothing compresses.
func randomLargeValue(rng *rand.Rand) []byte {
	v := make([]byte, largeBenchValue)
	for j := range v {
		v[j] = byte(rng.Uint32())
	}
	return v
}

// BenchmarkPebbleLargeStateGet reads batches of uniformly drawn keys from a
// store 33 times its block cache, through each read path.
func BenchmarkPebbleLargeStateGet(b *testing.B) {
	p, pool := openLargeBench(b, Options{CacheBytes: largeBenchCacheB})
	rng := rand.New(rand.NewPCG(3, 4))
	batch := make([][]byte, largeBenchBatch)
	for _, v := range []struct {
		name string
		get  func([][]byte) ([][]byte, error)
	}{{"point", p.multiGetPoint}, {"iter", p.multiGetIter}, {"prefix", p.multiGetPrefix}} {
		b.Run(v.name, func(b *testing.B) {
			for range b.N {
				for i := range batch {
					batch[i] = pool[rng.IntN(len(pool))]
				}
				vals, err := v.get(batch)
				if err != nil {
					b.Fatal(err)
				}
				for i, val := range vals {
					if len(val) != largeBenchValue {
						b.Fatalf("key %d: %d bytes", i, len(val))
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*largeBenchBatch), "ns/key")
		})
	}
}

// BenchmarkPebbleLargeStateGetPut is a stateful batch on large state: a
// MultiGet of uniformly drawn keys and a MultiPut of new values for them
// (whole values rewritten, as q6*'s mapper does), under several Pebble
// sizings. cpu-ns/key is the process's CPU (user + system, compactions
// included) per key over the timed loop: on 2 cores Pebble's background
// compactions take CPU the task would otherwise have, so wall time alone
// would hide them.
func BenchmarkPebbleLargeStateGetPut(b *testing.B) {
	// Measured here before the defaults moved (µs of CPU per key):
	// memtable 16 MiB, L0 compactions from 4 files 67; memtable 64 MiB 64;
	// and L0 from 8 files 52; and no compression 67.
	for _, v := range []struct {
		name string
		o    Options
	}{
		{"defaults", Options{CacheBytes: largeBenchCacheB}},
		{"values-inline", Options{CacheBytes: largeBenchCacheB, ValueSeparationBytes: -1}},
		{"cache=4x", Options{CacheBytes: 4 * largeBenchCacheB}},
		{"memtable=16MiB,L0=4", Options{CacheBytes: largeBenchCacheB, MemTableBytes: 16 << 20, tune: func(po *pebble.Options) {
			po.L0CompactionThreshold, po.L0StopWritesThreshold = 4, 12
		}}},
	} {
		b.Run(v.name, func(b *testing.B) {
			p, pool := openLargeBench(b, v.o)
			rewrite := newLargeRewriter(p, pool)
			cpu0 := processCPU(b)
			b.ResetTimer()
			for range b.N {
				rewrite.batch(b)
			}
			b.StopTimer()
			keys := float64(b.N * largeBenchBatch)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/keys, "ns/key")
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/keys, "cpu-ns/key")
		})
	}
}

// largeRewriter runs stateful batches on large state: a MultiGet of
// uniformly drawn keys and a MultiPut of new values for them, whole values
// rewritten as q6*'s mapper does.
type largeRewriter struct {
	p    *Pebble
	pool [][]byte
	rng  *rand.Rand
	keys [][]byte
	kvs  []KV
}

func newLargeRewriter(p *Pebble, pool [][]byte) *largeRewriter {
	return &largeRewriter{p: p, pool: pool, rng: rand.New(rand.NewPCG(3, 4)),
		keys: make([][]byte, largeBenchBatch), kvs: make([]KV, largeBenchBatch)}
}

func (w *largeRewriter) batch(b *testing.B) {
	for i := range w.keys {
		w.keys[i] = w.pool[w.rng.IntN(len(w.pool))]
	}
	vals, err := w.p.MultiGet(w.keys)
	if err != nil {
		b.Fatal(err)
	}
	for i, v := range vals {
		nv := append([]byte(nil), v...)
		nv[0]++
		w.kvs[i] = KV{w.keys[i], nv}
	}
	if err := w.p.MultiPut(w.kvs); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the process's user + system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitCompactions settles the store (Pebble.Settle), so reads meet the
// settled shape of the tree rather than the pile of L0 files the load left.
func waitCompactions(b *testing.B, p *Pebble) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := p.Settle(ctx)
	if err != nil {
		b.Fatal(err)
	}
	m := p.db.Metrics()
	b.Logf("settled after %d compactions in %s: L0 %d files, %d sstables in all, %.0f MB", st.Compactions, st.Waited.Round(time.Millisecond), m.Levels[0].TablesCount, m.Total().TablesCount, float64(m.Total().TablesSize)/1e6)
}

// BenchmarkPebbleLargeStateChurn rewrites every key of large state several
// times over (uniformly drawn, whole values, as q6*'s mapper does), then
// settles the tree and scans the whole store in key order, as a bucket
// handoff does. It reports the update cost (cpu-ns/key), the space the
// overwritten values still hold (disk/live: Pebble's disk usage over the
// live values' bytes), the files (blob-files, sstables, and how often the
// file cache had to open one) and the scan's cost per key (scan-ns/key),
// for this package's options and for Pebble's blob reference depth and
// file cache (10 and 1000).
func BenchmarkPebbleLargeStateChurn(b *testing.B) {
	const rounds = 3 // rewrites per key
	for _, v := range []struct {
		name string
		tune func(*pebble.Options)
	}{
		{"defaults", nil},
		{"pebble-depth-and-files", func(po *pebble.Options) {
			pol := po.Experimental.ValueSeparationPolicy()
			pol.MaxBlobReferenceDepth = 10
			po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy { return pol }
			po.FileCache, po.MaxOpenFiles = nil, 1000 // a cache of its own, Pebble's size
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			for range b.N {
				p, pool := openLargeBench(b, Options{CacheBytes: largeBenchCacheB, tune: v.tune})
				rewrite := newLargeRewriter(p, pool)
				updates := rounds * len(pool)
				cpu0 := processCPU(b)
				for done := 0; done < updates; done += largeBenchBatch {
					rewrite.batch(b)
				}
				b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(updates), "cpu-ns/key")
				m := p.db.Metrics()
				b.ReportMetric(float64(m.BlobFiles.LiveCount), "blob-files")
				b.ReportMetric(float64(m.Total().TablesCount), "sstables")
				b.ReportMetric(100*float64(m.FileCache.Misses)/float64(max(1, m.FileCache.Hits+m.FileCache.Misses)), "filecache-miss-%")
				waitCompactions(b, p)
				live := float64(len(pool) * (largeBenchValue + 8))
				b.ReportMetric(float64(p.db.Metrics().DiskSpaceUsage())/live, "disk/live")
				scan0, n := time.Now(), 0
				if err := p.Scan(nil, nil, func(_, v []byte) bool { n++; return len(v) == largeBenchValue }); err != nil {
					b.Fatal(err)
				}
				if n != len(pool) {
					b.Fatalf("scan saw %d keys, want %d", n, len(pool))
				}
				b.ReportMetric(float64(time.Since(scan0).Nanoseconds())/float64(n), "scan-ns/key")
			}
		})
	}
}
