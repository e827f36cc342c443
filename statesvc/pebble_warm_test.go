package statesvc

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// warmTestStore writes n keys of size-byte values to a new store in dir,
// closes it, and reopens it (cold value cache) with cacheBytes of block
// cache.
func warmTestStore(t *testing.T, dir string, n, size int, cacheBytes int64) *Pebble {
	t.Helper()
	p, err := OpenPebble(Options{Dir: dir, Volatile: true, CacheBytes: cacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	kvs := make([]KV, n)
	for i := range kvs {
		kvs[i] = KV{Key: []byte(fmt.Sprintf("k%06d", i)), Value: bytes.Repeat([]byte{byte(i)}, size)}
	}
	if err := p.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = OpenPebble(Options{Dir: dir, Volatile: true, CacheBytes: cacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestPebbleWarmCacheReadsRestoredState: after WarmCache, every key of a
// state that fits is answered by the value cache, with its own value.
func TestPebbleWarmCacheReadsRestoredState(t *testing.T) {
	const n, size = 2000, 1024
	p := warmTestStore(t, filepath.Join(t.TempDir(), "db"), n, size, 8<<20)
	keys, nb, err := p.WarmCache()
	if err != nil {
		t.Fatal(err)
	}
	if keys != n || nb != n*size {
		t.Fatalf("WarmCache read %d keys, %d bytes; want %d, %d", keys, nb, n, n*size)
	}
	ks := make([][]byte, n)
	for i := range ks {
		ks[i] = []byte(fmt.Sprintf("k%06d", i))
	}
	vals, err := p.MultiGet(ks)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, size)) {
			t.Fatalf("key %s: value of %d bytes starting %v, want %d bytes of %d", ks[i], len(v), v[:min(4, len(v))], size, byte(i))
		}
	}
	if st := p.CacheStats(); st.Hits != uint64(n) || st.Lookups != uint64(n) {
		t.Fatalf("cache answered %d of %d lookups after the warm-up, want all %d", st.Hits, st.Lookups, n)
	}
}

// TestPebbleWarmCacheStopsAtItsShare: a state larger than the cache fills
// it to its warm share and no further, and what it read stays readable.
func TestPebbleWarmCacheStopsAtItsShare(t *testing.T) {
	const n, size = 4000, 1024
	p := warmTestStore(t, filepath.Join(t.TempDir(), "db"), n, size, 1<<20) // value cache 2 MiB: ~1.7 K such entries
	keys, _, err := p.WarmCache()
	if err != nil {
		t.Fatal(err)
	}
	limit := p.CacheStats().LimitBytes
	p.cache.mu.Lock()
	used := p.cache.bytes
	p.cache.mu.Unlock()
	if keys == 0 || keys >= n {
		t.Fatalf("WarmCache read %d of %d keys into a cache of %d bytes; want some, not all", keys, n, limit)
	}
	if share := limit / warmShareDen * warmShareNum; used < share || used > share+2*size+cacheEntryOverhead+64 {
		t.Fatalf("cache holds %d bytes after the warm-up; want its share %d (one entry over at most)", used, share)
	}
	// Again: nothing more to read in.
	if again, _, err := p.WarmCache(); err != nil || again != 0 {
		t.Fatalf("second WarmCache read %d keys (err %v), want 0", again, err)
	}
}

// TestValueCacheWarmStopsAfterAWrite: a write made after the warm-up
// started ends it (what it read may be older than the write), and the
// written value stays.
func TestValueCacheWarmStopsAfterAWrite(t *testing.T) {
	c := newValueCache(1 << 20)
	gen, room := c.warmStart()
	if room <= 0 {
		t.Fatalf("empty cache has room %d to warm", room)
	}
	c.beginWrite()
	c.wrote([]KV{{Key: []byte("a"), Value: []byte("new")}}, nil)
	n, _, more := c.warm(gen, []KV{{Key: []byte("a"), Value: []byte("old")}, {Key: []byte("b"), Value: []byte("b")}})
	if n != 0 || more {
		t.Fatalf("warm after a write cached %d keys, more=%v; want 0, false", n, more)
	}
	out := make([][]byte, 2)
	miss, _, _ := c.lookup([][]byte{[]byte("a"), []byte("b")}, out)
	if string(out[0]) != "new" || len(miss) != 1 || miss[0] != 1 {
		t.Fatalf("after the stopped warm-up: a = %q, misses %v; want \"new\" and b missing", out[0], miss)
	}
}
