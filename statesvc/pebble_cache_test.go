package statesvc

import (
	"fmt"
	"testing"
)

func TestValueCacheCoherence(t *testing.T) {
	c := newValueCache(1 << 20)
	k := [][]byte{[]byte("k")}
	vals, miss, gen := c.lookup(k)
	if vals == nil || len(miss) != 1 {
		t.Fatalf("empty cache: vals %v miss %v", vals, miss)
	}
	// A write lands between the read from the store and the fill: the
	// fill (an older value) must not be installed.
	c.beginWrite()
	c.wrote([]KV{{Key: k[0], Value: []byte("new")}})
	c.fill(gen, k, [][]byte{[]byte("old")})
	vals, miss, _ = c.lookup(k)
	if len(miss) != 0 || string(vals[0].v) != "new" || !vals[0].present {
		t.Fatalf("after a racing fill: %+v miss %v, want new", vals[0], miss)
	}
	// Deletes are cached as absent; reset forgets everything.
	c.wrote([]KV{{Key: k[0]}})
	if vals, miss, _ = c.lookup(k); len(miss) != 0 || vals[0].present {
		t.Fatalf("deleted key: %+v miss %v", vals[0], miss)
	}
	c.reset()
	if _, miss, _ = c.lookup(k); len(miss) != 1 {
		t.Fatal("reset kept an entry")
	}
	// The cache owns copies: changing the written slice changes nothing.
	v := []byte("abc")
	c.wrote([]KV{{Key: k[0], Value: v}})
	v[0] = 'X'
	if vals, _, _ = c.lookup(k); string(vals[0].v) != "abc" {
		t.Fatalf("cached value aliases the caller's: %q", vals[0].v)
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
		_, _, gen := c.lookup(batch)
		c.fill(gen, batch, vals)
		if c.bytes > c.limit {
			t.Fatalf("cache holds %d bytes, limit %d", c.bytes, c.limit)
		}
	}
	if !c.off || len(c.m) != 0 {
		t.Fatalf("cache with no hits: off %v, %d entries", c.off, len(c.m))
	}
	// A cold cache far from full stays on however few hits it has.
	cold := newValueCache(1 << 30)
	for i := 0; i < 2*cacheWindow; i += 1000 {
		batch := make([][]byte, 1000)
		for j := range batch {
			batch[j] = key(i + j)
		}
		_, _, gen := cold.lookup(batch)
		cold.fill(gen, batch, make([][]byte, 1000))
	}
	if cold.off {
		t.Fatal("a filling cache switched off")
	}
	// Off: writes are not cached, lookups bypass; after enough bypassed keys
	// it tries again, empty.
	c.wrote([]KV{{Key: key(1), Value: []byte("v")}})
	if vals, _, _ := c.lookup([][]byte{key(1)}); vals != nil || len(c.m) != 0 {
		t.Fatal("an off cache answered or stored")
	}
	for range cacheRetryAfter/1000 + 1 {
		c.lookup(make([][]byte, 1000))
	}
	if vals, miss, _ := c.lookup([][]byte{key(1)}); c.off || vals == nil || len(miss) != 1 {
		t.Fatalf("cache did not come back empty: off %v miss %v", c.off, miss)
	}
}
