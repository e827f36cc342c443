package statesvc

import (
	"fmt"
	"testing"
)

// CacheStats counts every key MultiGet looks up and the ones the cache
// answered, including known-absent keys and lookups while the cache is off.
func TestPebbleCacheStats(t *testing.T) {
	p, err := OpenPebble(Options{Dir: t.TempDir(), CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if s := p.CacheStats(); s.Lookups != 0 || s.Hits != 0 || s.LimitBytes != (1<<20)*valueCacheMultiple {
		t.Fatalf("fresh store: %+v", s)
	}
	keys := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	if err := p.MultiPut([]KV{{Key: keys[0], Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	// First read: "a" was cached by the write; "b" and "c" are read from
	// Pebble and then cached as absent. Second read: all three hit.
	for range 2 {
		if _, err := p.MultiGet(keys); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.CacheStats(); s.Lookups != 6 || s.Hits != 4 {
		t.Fatalf("after two reads of 3 keys: %+v, want 6 lookups, 4 hits", s)
	}
	// Off: lookups count, hits do not.
	p.cache.mu.Lock()
	p.cache.switchOffLocked()
	off := p.cache.off
	p.cache.mu.Unlock()
	if !off {
		t.Fatal("cache did not switch off")
	}
	more := make([][]byte, 10)
	for i := range more {
		more[i] = []byte(fmt.Sprint("k", i))
	}
	if _, err := p.MultiGet(more); err != nil {
		t.Fatal(err)
	}
	if s := p.CacheStats(); s.Lookups != 16 || s.Hits != 4 {
		t.Fatalf("after 10 lookups while off: %+v, want 16 lookups, 4 hits", s)
	}
}
