package statesvc

import (
	"fmt"
	"testing"
)

// cachedLookup is lookup with a fresh output slice.
func cachedLookup(c *valueCache, keys [][]byte) (vals [][]byte, miss []int, gen uint64, on bool) {
	vals = make([][]byte, len(keys))
	miss, gen, on = c.lookup(keys, vals)
	return vals, miss, gen, on
}

func TestValueCacheCoherence(t *testing.T) {
	c := newValueCache(1 << 20)
	k := [][]byte{[]byte("k")}
	_, miss, gen, on := cachedLookup(c, k)
	if !on || len(miss) != 1 {
		t.Fatalf("empty cache: on %v miss %v", on, miss)
	}
	// A write lands between the read from the store and the fill: the
	// fill (an older value) must not be installed.
	c.beginWrite()
	c.wrote([]KV{{Key: k[0], Value: []byte("new")}}, nil)
	c.fill(gen, k, [][]byte{[]byte("old")}, nil)
	vals, miss, _, _ := cachedLookup(c, k)
	if len(miss) != 0 || string(vals[0]) != "new" {
		t.Fatalf("after a racing fill: %q miss %v, want new", vals[0], miss)
	}
	// Deletes are cached as absent; reset forgets everything.
	c.wrote([]KV{{Key: k[0]}}, nil)
	if vals, miss, _, _ = cachedLookup(c, k); len(miss) != 0 || vals[0] != nil {
		t.Fatalf("deleted key: %q miss %v", vals[0], miss)
	}
	c.reset()
	if _, miss, _, _ = cachedLookup(c, k); len(miss) != 1 {
		t.Fatal("reset kept an entry")
	}
	// The cache owns copies: changing the written slice changes nothing.
	v := []byte("abc")
	c.wrote([]KV{{Key: k[0], Value: v}}, nil)
	v[0] = 'X'
	if vals, _, _, _ = cachedLookup(c, k); string(vals[0]) != "abc" {
		t.Fatalf("cached value aliases the caller's: %q", vals[0])
	}
	// And the caller owns what lookup returns: changing it changes nothing,
	// nor does a later write of the same key change a returned value.
	vals, _, _, _ = cachedLookup(c, k)
	vals[0][0] = 'Y'
	c.wrote([]KV{{Key: k[0], Value: []byte("def")}}, nil)
	if string(vals[0]) != "Ybc" {
		t.Fatalf("returned value changed under the caller: %q", vals[0])
	}
	if again, _, _, _ := cachedLookup(c, k); string(again[0]) != "def" {
		t.Fatalf("after a rewrite: %q, want def", again[0])
	}
}

func TestValueCacheBoundsAndSwitchesOff(t *testing.T) {
	c := newValueCache(64 << 10)
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%08d", i)) }
	// Distinct keys only: no lookup ever hits, so once the cache is full
	// it switches off, and the size stays bounded meanwhile.
	for i := 0; i < 2*cacheWindow; i += 1000 {
		batch := make([][]byte, 1000)
		vals := make([][]byte, 1000)
		for j := range batch {
			batch[j], vals[j] = key(i+j), make([]byte, 100)
		}
		_, _, gen, _ := cachedLookup(c, batch)
		c.fill(gen, batch, vals, nil)
		if c.bytes > c.limit {
			t.Fatalf("cache holds %d bytes, limit %d", c.bytes, c.limit)
		}
	}
	if !c.off || c.m.len() != 0 {
		t.Fatalf("cache with no hits: off %v, %d entries", c.off, c.m.len())
	}
	// A cold cache far from full stays on however few hits it has.
	cold := newValueCache(1 << 30)
	for i := 0; i < 2*cacheWindow; i += 1000 {
		batch := make([][]byte, 1000)
		for j := range batch {
			batch[j] = key(i + j)
		}
		_, _, gen, _ := cachedLookup(cold, batch)
		cold.fill(gen, batch, make([][]byte, 1000), nil)
	}
	if cold.off {
		t.Fatal("a filling cache switched off")
	}
	// Off: writes are not cached, lookups bypass; after enough bypassed keys
	// it tries again, empty.
	c.wrote([]KV{{Key: key(1), Value: []byte("v")}}, nil)
	if _, _, _, on := cachedLookup(c, [][]byte{key(1)}); on || c.m.len() != 0 {
		t.Fatal("an off cache answered or stored")
	}
	for range cacheRetryAfter/1000 + 1 {
		cachedLookup(c, make([][]byte, 1000))
	}
	if _, miss, _, on := cachedLookup(c, [][]byte{key(1)}); c.off || !on || len(miss) != 1 {
		t.Fatalf("cache did not come back empty: off %v miss %v", c.off, miss)
	}
}

// TestValueCacheEvictsOnlyClean: with dirty entries at their budget, reads
// of other keys still fit (clean entries come and go within the limit) and
// no dirty entry is ever evicted.
func TestValueCacheEvictsOnlyClean(t *testing.T) {
	c := newValueCache(256 << 10)
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%08d", i)) }
	var dirty []KV
	for i := 0; c.dirtyBytes <= c.dirtyBudget()-200; i++ {
		kv := KV{Key: key(i), Value: []byte(fmt.Sprint("v", i))}
		c.buffer([]KV{kv}, nil)
		dirty = append(dirty, kv)
	}
	for i := 0; i < 50_000; i += 100 {
		batch := make([][]byte, 100)
		for j := range batch {
			batch[j] = key(1_000_000 + i + j)
		}
		_, _, gen, _ := cachedLookup(c, batch)
		c.fill(gen, batch, make([][]byte, 100), nil)
		if c.bytes > c.limit {
			t.Fatalf("cache holds %d bytes, limit %d", c.bytes, c.limit)
		}
	}
	if c.dirtyLen() != len(dirty) {
		t.Fatalf("%d dirty entries, want %d", c.dirtyLen(), len(dirty))
	}
	checkCache(t, "after the reads", c)
	for _, kv := range dirty {
		vals, miss, _, _ := cachedLookup(c, [][]byte{kv.Key})
		if len(miss) != 0 || string(vals[0]) != string(kv.Value) {
			t.Fatalf("dirty %q: %q (miss %v), want %q", kv.Key, vals[0], miss, kv.Value)
		}
	}
}

// A cache sized for kilobyte values holds all of a working set of them,
// but no more small values than maxValueCacheEntries: an entry costs per
// entry, whatever its size.
func TestValueCacheEntryBound(t *testing.T) {
	fillN := func(c *valueCache, n, size int) {
		// Written through (clean entries), not looked up: with no
		// lookups the cache never judges its hit rate, so only its
		// bounds evict.
		v := make([]byte, size)
		for i := 0; i < n; i += 1000 {
			kvs := make([]KV, 0, 1000)
			for j := i; j < min(i+1000, n); j++ {
				kvs = append(kvs, KV{Key: fmt.Appendf(nil, "key-%08d", j), Value: v})
			}
			c.beginWrite()
			c.wrote(kvs, nil)
		}
	}
	for _, tc := range []struct {
		name        string
		limit       int64
		keys, size  int
		wantAtLeast int
		wantAtMost  int
	}{
		// q6*'s sellers: 200 K values of 2 KB in a 512 MB cache.
		{"kilobyte values fit", 512 << 20, 200_000, 2048, 200_000, 200_000},
		// 8-byte counts: bounded by entries, not bytes.
		{"small values bounded by entries", 512 << 20, 600_000, 8, maxValueCacheEntries / 2, maxValueCacheEntries},
		// A small cache is bounded by its bytes as before.
		{"small cache", 1 << 20, 50_000, 8, 1, (1 << 20) / cacheEntryOverhead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newValueCache(tc.limit)
			fillN(c, tc.keys, tc.size)
			c.mu.Lock()
			n, bytes := c.m.n, c.bytes
			c.mu.Unlock()
			if n < tc.wantAtLeast || n > tc.wantAtMost {
				t.Fatalf("%d entries (%d bytes charged) after filling %d keys of %d bytes; want %d..%d",
					n, bytes, tc.keys, tc.size, tc.wantAtLeast, tc.wantAtMost)
			}
			if bytes > tc.limit {
				t.Fatalf("%d bytes charged, over the limit %d", bytes, tc.limit)
			}
		})
	}
}

// Eviction takes the clean entries oldest first and skips dirty ones
// without walking past them: an entry dirtied after it was queued stays,
// and is queued again once written back.
func TestValueCacheEvictsOldestClean(t *testing.T) {
	c := newValueCache(64 << 10)
	c.minCharge = 0
	key := func(i int) []byte { return StateKey(nil, "op", i%7, "s", fmt.Appendf(nil, "%06d", i)) }
	v := make([]byte, 200)
	write := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			c.beginWrite()
			c.wrote([]KV{{Key: key(i), Value: v}}, nil)
		}
	}
	cached := func(i int) bool {
		_, miss, _, _ := cachedLookup(c, [][]byte{key(i)})
		return len(miss) == 0
	}
	write(0, 100)
	// Key 0, the oldest, is rewritten dirty: eviction must pass it by.
	c.buffer([]KV{{Key: key(0), Value: v}}, nil)
	write(100, 400) // well past the limit
	checkCache(t, "after the writes", c)
	if !cached(0) {
		t.Fatal("the dirty entry was evicted")
	}
	if cached(1) || cached(2) {
		t.Fatal("the oldest clean entries survived eviction")
	}
	if !cached(399) || !cached(398) {
		t.Fatal("the newest clean entries were evicted")
	}
	// Written back, key 0 is clean and queued again, behind the others.
	n, err := c.oldestDirty(-1, func(string, []byte, bool) error { return nil })
	if err != nil || n != 1 {
		t.Fatalf("oldestDirty = %d, %v", n, err)
	}
	c.markWritten(n)
	checkCache(t, "after the write-back", c)
	write(400, 700)
	checkCache(t, "after more writes", c)
	if cached(0) {
		t.Fatal("the written-back entry was never evicted")
	}
}

// Entries dropped with their range leave the clean queue soon, so that it
// holds no dropped value alive and stays in proportion to the cache.
func TestValueCacheCleanQueueForgetsDropped(t *testing.T) {
	c := newValueCache(1 << 30)
	for b := 0; b < 8; b++ {
		kvs := make([]KV, 1000)
		for i := range kvs {
			kvs[i] = KV{Key: StateKey(nil, "op", b, "s", fmt.Appendf(nil, "%06d", i)), Value: []byte("v")}
		}
		c.beginWrite()
		c.wrote(kvs, nil)
	}
	for b := 0; b < 7; b++ {
		lo, hi := BucketRange("op", b, b+1)
		c.dropRange(lo, hi)
		checkCache(t, fmt.Sprint("after dropping bucket ", b), c)
	}
	c.mu.Lock()
	queued, entries := len(c.clean)-c.cleanHead, c.m.len()
	c.mu.Unlock()
	if entries != 1000 || queued > 2*entries+1024 {
		t.Fatalf("%d entries left, %d queued; want 1000 entries and at most %d queued", entries, queued, 2*entries+1024)
	}
}

// With dirty entries charged past the limit (small values, each charged
// minCharge), a fill caches nothing: no clean entry could stay.
func TestValueCacheFillSkippedWhenDirtyFillsIt(t *testing.T) {
	c := newValueCache(1 << 20)
	c.minCharge = 4 << 10
	for i := 0; c.dirtyCharge < c.limit; i++ {
		c.buffer([]KV{{Key: fmt.Appendf(nil, "dirty-%06d", i), Value: []byte("v")}}, nil)
	}
	keys := [][]byte{[]byte("read-1"), []byte("read-2")}
	_, miss, gen, on := cachedLookup(c, keys)
	if !on || len(miss) != 2 {
		t.Fatalf("lookup: on %v, miss %v", on, miss)
	}
	c.fill(gen, keys, [][]byte{[]byte("a"), []byte("b")}, nil)
	checkCache(t, "after the fill", c)
	if _, miss, _, _ := cachedLookup(c, keys); len(miss) != 2 {
		t.Fatalf("filled keys were kept with the dirty entries over the limit: miss %v", miss)
	}
}
