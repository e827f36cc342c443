package statesvc

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// BenchmarkValueCacheFillMostlyDirty reads batches of keys the cache does
// not hold into a default-sized value cache (512 MiB) whose dirty entries
// are at their budget, as on a task's old owner with borg's state (6.3 M
// keys, ~350-byte values) when its scale-out began: each batch is looked
// up and filled, and every fill passes the limit, so it costs what evicting
// clean entries from among the dirty ones costs. With 2 KB values (q6*)
// the dirty entries take 3/4 of the limit and clean ones have room; with
// 350-byte values each is charged minCharge (2 KiB), so the dirty ones are
// charged past the limit and no clean entry can stay.
func BenchmarkValueCacheFillMostlyDirty(b *testing.B) {
	for _, size := range []int{350, 2048} {
		b.Run(fmt.Sprintf("value=%dB", size), func(b *testing.B) {
			c := newValueCache(ValueCacheLimit(DefaultCacheBytes))
			// Keys fall in buckets as hashed keys do: a batch's keys
			// spread over all of them.
			key := func(i uint64) []byte {
				bucket := int(i * 0x9e3779b97f4a7c15 >> 54)
				return StateKey(nil, "borg", bucket, "s", binary.BigEndian.AppendUint64(nil, i))
			}
			v := make([]byte, size)
			var next uint64
			for c.dirtyBytes < c.dirtyBudget() {
				kvs := make([]KV, 1024)
				for j := range kvs {
					kvs[j] = KV{Key: key(next), Value: v}
					next++
				}
				c.buffer(kvs, nil)
			}
			c.mu.Lock()
			dirty, charged, limit := c.dirtyLen(), c.dirtyCharge, c.limit
			c.mu.Unlock()
			b.Logf("%d dirty entries of %d B, charged %d MiB of a %d MiB limit", dirty, size, charged>>20, limit>>20)

			const batch = 256
			keys := make([][]byte, batch)
			vals := make([][]byte, batch)
			out := make([][]byte, batch)
			for j := range vals {
				vals[j] = v
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range keys {
					keys[j] = key(next)
					next++
				}
				clear(out)
				miss, gen, ok := c.lookup(keys, out)
				if ok {
					c.fill(gen, keys, vals[:len(miss)], nil)
				}
			}
			b.StopTimer()
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.dirtyLen() != dirty {
				b.Fatalf("%d dirty entries after the reads, want %d", c.dirtyLen(), dirty)
			}
			if c.bytes > max(c.limit, c.dirtyCharge) {
				b.Fatalf("cache charged %d bytes, over both its limit %d and its dirty entries' %d", c.bytes, c.limit, c.dirtyCharge)
			}
		})
	}
}
