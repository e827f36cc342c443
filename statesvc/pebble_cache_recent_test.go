package statesvc

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// A write of the keys just looked up finds their entries without the map;
// a key buffer changed between the lookup and the write, and entries
// evicted meanwhile, take the map path: the values stay exact.
func TestValueCacheRecentEntries(t *testing.T) {
	c := newValueCache(1 << 20)
	a, b := []byte("key-a"), []byte("key-b")
	c.wrote([]KV{{Key: []byte("key-a"), Value: []byte("1")}, {Key: []byte("key-b"), Value: []byte("2")}}, nil)
	if _, miss, _, _ := cachedLookup(c, [][]byte{a, b}); len(miss) != 0 {
		t.Fatalf("miss %v", miss)
	}
	next := 0
	if e := c.recentLocked(b, &next); e == nil || e.key != "key-b" || next != 2 {
		t.Fatalf("recent entry of key-b: %v next %d", e, next)
	}
	// The caller reuses a's buffer for another key: no recent entry.
	cachedLookup(c, [][]byte{a, b})
	copy(a, "key-c")
	next = 0
	if e := c.recentLocked(a, &next); e != nil {
		t.Fatalf("changed buffer matched recent entry %q", e.key)
	}
	c.buffer([]KV{{Key: a, Value: []byte("3")}, {Key: b, Value: []byte("4")}}, nil)
	for k, want := range map[string]string{"key-a": "1", "key-b": "4", "key-c": "3"} {
		vals, miss, _, _ := cachedLookup(c, [][]byte{[]byte(k)})
		if len(miss) != 0 || string(vals[0]) != want {
			t.Fatalf("%s = %q (miss %v), want %q", k, vals[0], miss, want)
		}
	}
	// An evicted entry is not used, even if it was looked up.
	d := []byte("key-d")
	c.wrote([]KV{{Key: []byte("key-d"), Value: []byte("5")}}, nil)
	cachedLookup(c, [][]byte{d})
	c.reset()
	next = 0
	if e := c.recentLocked(d, &next); e != nil {
		t.Fatal("recent entry survived reset")
	}
}

// Random batches of gets and puts on a volatile Pebble with a cache far
// smaller than the keys (evictions and write-backs throughout), with key
// buffers sometimes reused between get and put, match a map.
func TestPebbleVolatileRecentOracle(t *testing.T) {
	p, err := OpenPebble(Options{Dir: t.TempDir(), Volatile: true, CacheBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	oracle := map[string]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	const nKeys = 5000
	for round := 0; round < 300; round++ {
		n := 1 + rng.IntN(200)
		keys := make([][]byte, n)
		seen := map[string]bool{}
		for i := range keys {
			k := []byte("state/" + string(rune('a'+rng.IntN(26))) + "/" + strconv.Itoa(rng.IntN(nKeys)))
			for seen[string(k)] {
				k = append(k, 'x')
			}
			seen[string(k)] = true
			keys[i] = k
		}
		vals, err := p.MultiGet(keys)
		if err != nil {
			t.Fatal(err)
		}
		kvs := make([]KV, 0, n)
		for i, k := range keys {
			var got uint64
			if len(vals[i]) == 8 {
				got = binary.LittleEndian.Uint64(vals[i])
			}
			if want := oracle[string(k)]; got != want {
				t.Fatalf("round %d: %s = %d, want %d", round, k, got, want)
			}
			switch rng.IntN(10) {
			case 0: // not written
				continue
			case 1: // the buffer reused for a key not looked up
				k[len(k)-1] ^= 0x20
				if seen[string(k)] {
					k[len(k)-1] ^= 0x20
				}
			}
			if rng.IntN(20) == 0 {
				kvs = append(kvs, KV{Key: k})
				delete(oracle, string(k))
				continue
			}
			v := oracle[string(k)] + 1 + uint64(rng.IntN(3))
			oracle[string(k)] = v
			kvs = append(kvs, KV{Key: k, Value: binary.LittleEndian.AppendUint64(nil, v)})
		}
		if err := p.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
		if round%25 == 0 {
			checkCache(t, fmt.Sprint("round ", round), p.cache)
		}
	}
	for k, want := range oracle {
		vals, err := p.MultiGet([][]byte{[]byte(k)})
		if err != nil {
			t.Fatal(err)
		}
		if len(vals[0]) != 8 || binary.LittleEndian.Uint64(vals[0]) != want {
			t.Fatalf("%s = %x, want %d", k, vals[0], want)
		}
	}
}
