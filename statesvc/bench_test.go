package statesvc

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	benchBatch    = 1000
	benchValueLen = 100
	benchPreload  = 200_000
)

// benchStateKeys returns n state keys of operator "agg", state "v", 8-byte
// user keys, spread over 128 buckets.
func benchStateKeys(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		var uk [8]byte
		binary.BigEndian.PutUint64(uk[:], uint64(i)*0x9e3779b97f4a7c15)
		out[i] = StateKey(nil, "agg", i%128, "v", uk[:])
	}
	return out
}

// benchBatches draws batches of distinct keys from pool.
func benchBatches(pool [][]byte, batches int) [][][]byte {
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([][][]byte, batches)
	for b := range out {
		perm := rng.Perm(len(pool))[:benchBatch]
		for _, i := range perm {
			out[b] = append(out[b], pool[i])
		}
	}
	return out
}

func preload(b *testing.B, s Store, pool [][]byte) {
	val := make([]byte, benchValueLen)
	for i := 0; i < len(pool); i += 10_000 {
		var kvs []KV
		for _, k := range pool[i:min(i+10_000, len(pool))] {
			kvs = append(kvs, KV{k, val})
		}
		if err := s.MultiPut(kvs); err != nil {
			b.Fatal(err)
		}
	}
}

// benchGetPut is the stateful-operator pattern: one multi-get and one
// multi-put of 1000 distinct keys per batch, 100-byte values.
func benchGetPut(b *testing.B, s Store) {
	pool := benchStateKeys(benchPreload)
	preload(b, s, pool)
	batches := benchBatches(pool, 64)
	kvs := make([]KV, benchBatch)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		ks := batches[i%len(batches)]
		vals, err := s.MultiGet(ks)
		if err != nil {
			b.Fatal(err)
		}
		for j, k := range ks {
			v := vals[j]
			v[0]++ // the caller owns the copy: update in place
			kvs[j] = KV{k, v}
		}
		if err := s.MultiPut(kvs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/time.Since(start).Seconds(), "keys/s")
}

func BenchmarkPebbleMultiGetPut(b *testing.B) {
	p, err := OpenPebble(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	benchGetPut(b, p)
}

// BenchmarkPebbleVolatileMultiGetPut is the same on a volatile store (a
// task's: no WAL, write-back cache), whose 200 000 keys of 100 bytes are
// about twice its dirty budget, so write-backs run throughout.
func BenchmarkPebbleVolatileMultiGetPut(b *testing.B) {
	p, err := OpenPebble(Options{Dir: b.TempDir(), Volatile: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		b.StopTimer() // Close writes back the buffer and flushes: not per batch
		_ = p.Close()
	}()
	benchGetPut(b, p)
}

func BenchmarkMemoryMultiGetPut(b *testing.B) {
	benchGetPut(b, NewMemory())
}

// BenchmarkPebbleMultiGetVariants compares point gets with one sorted
// iterator per batch, on data in the memtable and flushed to sstables.
func BenchmarkPebbleMultiGetVariants(b *testing.B) {
	for _, flushed := range []bool{false, true} {
		p, err := OpenPebble(Options{Dir: b.TempDir(), MemTableBytes: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		pool := benchStateKeys(benchPreload)
		preload(b, p, pool)
		if flushed {
			if err := p.Flush(); err != nil {
				b.Fatal(err)
			}
		}
		// Half of each batch hits, half misses (first sight of a key).
		misses := benchStateKeys(2 * benchPreload)[benchPreload:]
		batches := benchBatches(append(pool[:benchPreload/2:benchPreload/2], misses[:benchPreload/2]...), 64)
		for name, get := range map[string]func([][]byte) ([][]byte, error){
			"point": p.multiGetPoint, "iter": p.multiGetIter, "prefix": p.multiGetPrefix,
		} {
			b.Run(fmt.Sprintf("flushed=%v/%s", flushed, name), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					if _, err := get(batches[i%len(batches)]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/key")
			})
		}
		_ = p.Close()
	}
}

const (
	kltBenchKeys    = 1_000_000
	kltBenchBuckets = 128
)

var kltBench struct {
	once sync.Once
	klt  *KLT
	keys [][]byte
}

func kltBenchKey(i int) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(i)*0x9e3779b97f4a7c15)
}

// buildBenchKLT fills a table with n 8-byte keys in 128 buckets, owners
// task-0..7 by bucket, as handoffs install them.
func buildBenchKLT(n int) *KLT {
	k := NewKLT(kltBenchBuckets)
	for j := range n {
		key := kltBenchKey(j)
		b := BucketOf(key, kltBenchBuckets)
		k.Add(b, key, fmt.Sprintf("task-%d", b%8))
	}
	return k
}

func benchKLT() (*KLT, [][]byte) {
	kltBench.once.Do(func() {
		ks := make([][]byte, kltBenchKeys)
		for i := range ks {
			ks[i] = kltBenchKey(i)
		}
		kltBench.klt, kltBench.keys = buildBenchKLT(kltBenchKeys), ks
		kltBench.klt.Lookup(nil)
	})
	return kltBench.klt, kltBench.keys
}

var kltBenchGoMap struct {
	once sync.Once
	m    map[string]uint32
}

// kltBenchMap is the naive alternative for comparison: key → owner<<16|bucket.
func kltBenchMap() map[string]uint32 {
	kltBenchGoMap.once.Do(func() {
		m := make(map[string]uint32)
		for j := range kltBenchKeys {
			m[string(kltBenchKey(j))] = uint32(j%8)<<16 | uint32(j%128)
		}
		kltBenchGoMap.m = m
	})
	return kltBenchGoMap.m
}

// BenchmarkKLTLookup measures one batch of 1000 distinct-key lookups in a
// 1M-key table (target: <= 40 µs per batch), through LookupBatchRefs as a
// stateful task makes them. The miss case also reports
// the false-positive rate: the share of absent keys that read as remote.
func BenchmarkKLTLookup(b *testing.B) {
	k, ks := benchKLT()
	// Batch keys live in one buffer per batch, as after decoding a batch.
	var hits, misses [][][]byte
	for _, batch := range benchBatches(ks, 64) {
		var buf, mbuf []byte
		for _, key := range batch {
			buf = append(buf, key...)
			mbuf = append(append(mbuf, 'x'), key...) // absent: 9 bytes
		}
		var h, m [][]byte
		for i := range batch {
			h = append(h, buf[8*i:8*i+8:8*i+8])
			m = append(m, mbuf[9*i:9*i+9:9*i+9])
		}
		hits, misses = append(hits, h), append(misses, m)
	}
	for _, c := range []struct {
		name    string
		batches [][][]byte
	}{{"hit", hits}, {"miss", misses}} {
		b.Run(c.name+"/batch", func(b *testing.B) {
			dst := make([]uint32, 0, benchBatch)
			remote := 0
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				dst, _ = k.LookupBatchRefs(c.batches[i%len(c.batches)], dst[:0])
				for _, r := range dst {
					if r != 0 {
						remote++
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/key")
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			if c.name == "miss" {
				b.ReportMetric(float64(remote)/float64(b.N*benchBatch), "fp-rate")
			} else if remote != b.N*benchBatch {
				b.Fatalf("%d of %d present keys read as local", b.N*benchBatch-remote, b.N*benchBatch)
			}
		})
		b.Run(c.name+"/gomap-baseline", func(b *testing.B) {
			m := kltBenchMap()
			b.ResetTimer()
			dst := make([]uint32, 0, benchBatch)
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				dst = dst[:0]
				for _, key := range c.batches[i%len(c.batches)] {
					dst = append(dst, m[string(key)])
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/key")
		})
		b.Run(c.name+"/single", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				for _, key := range c.batches[i%len(c.batches)] {
					k.Lookup(key)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/key")
		})
	}
}

// BenchmarkKLTLookupMigrating is BenchmarkKLTLookup's hit case while lazy
// migration is under way: one key of every bucket has been taken
// (RemoveKeys), so every bucket has removed entries awaiting a rebuild.
func BenchmarkKLTLookupMigrating(b *testing.B) {
	k := buildBenchKLT(kltBenchKeys)
	k.Lookup(nil)
	var ks [][]byte
	taken := map[int]bool{}
	for j := range kltBenchKeys {
		key := kltBenchKey(j)
		if bi := BucketOf(key, kltBenchBuckets); !taken[bi] {
			taken[bi] = true
			k.RemoveKeys(fmt.Sprintf("task-%d", bi%8), [][]byte{key})
			continue
		}
		ks = append(ks, key)
	}
	batches := benchBatches(ks, 64)
	for _, batch := range batches { // one buffer per batch, as in BenchmarkKLTLookup
		buf := make([]byte, 0, 8*len(batch))
		for _, key := range batch {
			buf = append(buf, key...)
		}
		for i := range batch {
			batch[i] = buf[8*i : 8*i+8 : 8*i+8]
		}
	}
	dst := make([]uint32, 0, benchBatch)
	runtime.GC() // the set-up's garbage, not to be collected while timing
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		dst, _ = k.LookupBatchRefs(batches[i%len(batches)], dst[:0])
		if dst[0] == 0 {
			b.Fatalf("present key %x reads as local", batches[i%len(batches)][0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchBatch), "ns/key")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkKLTMemory reports the footprint of 1M 8-byte keys in 128
// buckets: B/key as counted by Bytes and as measured on the heap, next to a
// plain map[string]uint32 (key → owner<<16|bucket). The table keeps no key
// bytes, so B/key-heap-excl-key (kept for comparison with key-storing
// tables, which report their heap figure minus the 8-byte key) equals
// B/key-heap.
func BenchmarkKLTMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		heap := benchKLTMemory(b, kltBenchKeys)
		b.ReportMetric(heap, "B/key-heap-excl-key")
		before := heapInUse()
		m := make(map[string]uint32)
		for j := range kltBenchKeys {
			m[string(kltBenchKey(j))] = uint32(j%8)<<16 | uint32(j%128)
		}
		b.ReportMetric(float64(heapInUse()-before)/kltBenchKeys, "B/key-gomap")
		runtime.KeepAlive(m)
	}
}

// BenchmarkKLTMemory10M is BenchmarkKLTMemory at 10M keys.
func BenchmarkKLTMemory10M(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchKLTMemory(b, 10*kltBenchKeys)
	}
}

func benchKLTMemory(b *testing.B, n int) float64 {
	before := heapInUse()
	k := buildBenchKLT(n)
	k.Lookup(nil) // as after a handoff: the first lookup merges insert buffers
	heap := float64(heapInUse()-before) / float64(n)
	b.ReportMetric(float64(k.Bytes())/float64(n), "B/key-counted")
	b.ReportMetric(heap, "B/key-heap")
	runtime.KeepAlive(k)
	return heap
}

// cpuTime returns the process's user+system CPU time in nanoseconds. On a
// shared, loaded machine it tracks a single-goroutine benchmark's cost more
// steadily than wall time (other processes' run time is not counted).
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkKLTInstall measures a new owner taking the lookup entries of a
// handoff: 1M keys of 128 buckets, as one entry per key (KLT.Add, as keys
// were once handed over) and as one sorted segment per bucket (AddSegment,
// as a handoff now sends them), ending with the first lookup's merge.
func BenchmarkKLTInstall(b *testing.B) {
	keys := make([][]byte, kltBenchKeys)
	segs := make([][]uint32, kltBenchBuckets)
	for j := range keys {
		keys[j] = kltBenchKey(j)
		bi, h := KLTHash(keys[j], kltBenchBuckets)
		segs[bi] = append(segs[bi], h)
	}
	for _, s := range segs {
		slices.Sort(s)
	}
	b.Run("per-key", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			k := NewKLT(kltBenchBuckets)
			for _, key := range keys {
				k.Add(BucketOf(key, kltBenchBuckets), key, "task-1")
			}
			k.Lookup(nil)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kltBenchKeys), "ns/key")
	})
	b.Run("segments", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			k := NewKLT(kltBenchBuckets)
			for bi, s := range segs {
				if err := k.AddSegment(Segment{Bucket: bi, Owner: "task-1", Hashes: s}); err != nil {
					b.Fatal(err)
				}
			}
			k.Lookup(nil)
			if k.Len() != kltBenchKeys {
				b.Fatalf("table holds %d entries, want %d", k.Len(), kltBenchKeys)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kltBenchKeys), "ns/key")
	})
}
