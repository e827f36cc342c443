package statesvc

import (
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkPebbleVolatileCheckpointFullBudget measures what a full dirty
// budget costs whatever writes every buffered write back: a Checkpoint
// (and likewise Close) of a store with the default caches whose dirty
// entries are q6*'s 2136-byte values up to the budget. It reports the
// dirty megabytes written and the seconds the Checkpoint took.
func BenchmarkPebbleVolatileCheckpointFullBudget(b *testing.B) {
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		p, err := OpenPebble(Options{Dir: filepath.Join(dir, "db"), Volatile: true})
		if err != nil {
			b.Fatal(err)
		}
		pool := benchStateKeys(largeBenchKeys)
		rng := rand.New(rand.NewPCG(1, 2))
		budget := p.cache.dirtyBudget()
		for i := 0; p.cache.bufferedBytes() < budget*9/10; i += 1000 {
			if i >= len(pool) {
				b.Fatalf("%d keys of %d bytes did not fill the %d-byte budget", len(pool), largeBenchValue, budget)
			}
			var kvs []KV
			for _, k := range pool[i:min(i+1000, len(pool))] {
				kvs = append(kvs, KV{k, randomLargeValue(rng)})
			}
			if err := p.MultiPut(kvs); err != nil {
				b.Fatal(err)
			}
		}
		dirty := p.cache.bufferedBytes()
		b.StartTimer()
		start := time.Now()
		if err := p.Checkpoint(filepath.Join(dir, "cp")); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(dirty)/1e6, "dirty-MB")
		b.ReportMetric(took.Seconds(), "checkpoint-s")
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
