package statesvc

import (
	"fmt"
	"path/filepath"
	"testing"
)

func TestShardOfAndSpan(t *testing.T) {
	for _, tc := range []struct {
		key  []byte
		want int
	}{
		{nil, 0},
		{[]byte{2, 'o', 'p'}, 0}, // too short for a bucket
		{StateKey(nil, "op", 0, "s", []byte("k")), 1},
		{StateKey(nil, "op", 258, "s", nil), 259},
		{StateKey(nil, "operator", MaxBuckets-1, "s", []byte("k")), MaxBuckets},
	} {
		if got := shardOf(tc.key); got != tc.want {
			t.Errorf("shardOf(%q) = %d, want %d", tc.key, got, tc.want)
		}
		if got := shardOf(string(tc.key)); got != tc.want {
			t.Errorf("shardOf(string %q) = %d, want %d", tc.key, got, tc.want)
		}
	}
	lo, hi := BucketRange("op", 3, 7)
	otherLo, _ := BucketRange("other", 3, 7)
	for _, tc := range []struct {
		name       string
		start, end []byte
		lo, hi     int
		all        bool
	}{
		{"bucket range", lo, hi, 4, 8, false},
		{"open end", lo, nil, 0, 0, true},
		{"open start", nil, hi, 0, 0, true},
		{"two operators", otherLo, hi, 0, 0, true},
		{"short bound", []byte{2, 'o', 'p'}, hi, 0, 0, true},
	} {
		l, h, all := shardSpan(tc.start, tc.end)
		if l != tc.lo || h != tc.hi || all != tc.all {
			t.Errorf("%s: shardSpan = %d, %d, %v; want %d, %d, %v", tc.name, l, h, all, tc.lo, tc.hi, tc.all)
		}
	}
}

// checkCache fails unless the cache's counters match its entries: the
// entry count, bytes, dirty bytes, and a dirty list of exactly the dirty
// entries, each once.
func checkCache(t *testing.T, what string, c *valueCache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	n, bytes, dirtyBytes, dirtyCharge, dirty := 0, int64(0), int64(0), int64(0), 0
	c.m.each(func(k string, e *cachedValue) bool {
		n++
		if e.key != k || e.gone || shardOf(k) >= len(c.m.s) || c.m.s[shardOf(k)][k] != e {
			t.Errorf("%s: entry %q misfiled (key %q, gone %v)", what, k, e.key, e.gone)
		}
		bytes += c.charge(e)
		if e.dirty {
			dirty++
			dirtyBytes += e.size()
			dirtyCharge += c.charge(e)
		}
		return true
	})
	listed := map[*cachedValue]bool{}
	for _, e := range c.dirty[c.dirtyHead:] {
		if !e.dirty || e.gone || listed[e] {
			t.Errorf("%s: dirty list holds %q (dirty %v, gone %v, twice %v)", what, e.key, e.dirty, e.gone, listed[e])
		}
		listed[e] = true
	}
	// Every clean entry is queued for eviction, once; the queue counts its
	// dropped entries.
	queued, goneQueued := map[*cachedValue]bool{}, 0
	for _, e := range c.clean[c.cleanHead:] {
		if !e.queued || queued[e] {
			t.Errorf("%s: clean queue holds %q (queued %v, twice %v)", what, e.key, e.queued, queued[e])
		}
		queued[e] = true
		if e.gone {
			goneQueued++
		}
	}
	if goneQueued != c.cleanGone {
		t.Errorf("%s: %d dropped entries queued (counted %d)", what, goneQueued, c.cleanGone)
	}
	c.m.each(func(k string, e *cachedValue) bool {
		if !e.dirty && !queued[e] {
			t.Errorf("%s: clean entry %q not queued for eviction", what, k)
		}
		return true
	})
	if n != c.m.len() || bytes != c.bytes || dirtyBytes != c.dirtyBytes || dirty != len(listed) {
		t.Errorf("%s: %d entries (counted %d), %d bytes (counted %d), %d dirty bytes (counted %d), %d dirty (listed %d)",
			what, n, c.m.len(), bytes, c.bytes, dirtyBytes, c.dirtyBytes, dirty, len(listed))
	}
	if dirtyCharge != c.dirtyCharge {
		t.Errorf("%s: dirty entries charged %d (counted %d)", what, dirtyCharge, c.dirtyCharge)
	}
}

// TestMoveOutDropsWholeShards: a move-out of some buckets leaves the
// cache's other buckets, and its counters, as they were, whether a moved
// bucket's map went whole (only its keys in it) or key by key (a key of
// another operator shares the bucket's shard).
func TestMoveOutDropsWholeShards(t *testing.T) {
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprint("mixed=", mixed), func(t *testing.T) {
			p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true, CacheBytes: 64 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			var kvs []KV
			for i := range 4000 {
				kvs = append(kvs, KV{Key: StateKey(nil, "op", i%8, "count", fmt.Appendf(nil, "k%05d", i)), Value: []byte{byte(i)}})
			}
			if mixed {
				kvs = append(kvs, KV{Key: StateKey(nil, "other", 3, "count", []byte("x")), Value: []byte("o")})
			}
			if err := p.MultiPut(kvs); err != nil {
				t.Fatal(err)
			}
			// Some clean entries too: half the keys written back, then read.
			if err := p.writeBackHalf(); err != nil {
				t.Fatal(err)
			}
			checkCache(t, "before", p.cache)
			lo, hi := BucketRange("op", 2, 5)
			got := map[string]bool{}
			if err := p.MoveOut(lo, hi, func(k, _ []byte) bool { got[string(k)] = true; return true }); err != nil {
				t.Fatal(err)
			}
			checkCache(t, "after the move-out", p.cache)
			for _, kv := range kvs {
				_, b, _, _, _ := ParseStateKey(kv.Key)
				op, _, _, _, _ := SplitStateKey(kv.Key)
				moved := string(op) == "op" && b >= 2 && b < 5
				if got[string(kv.Key)] != moved {
					t.Fatalf("key %q: handed out %v, want %v", kv.Key, got[string(kv.Key)], moved)
				}
				vals, err := p.MultiGet([][]byte{kv.Key})
				if err != nil {
					t.Fatal(err)
				}
				if (vals[0] == nil) != moved {
					t.Fatalf("key %q after the move-out: %x (moved %v)", kv.Key, vals[0], moved)
				}
			}
			checkCache(t, "after reading every key", p.cache)
		})
	}
}

// writeBackHalf writes the older half of the dirty entries to Pebble and
// reads them back (clean entries).
func (p *Pebble) writeBackHalf() error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	var kvs []KV
	n, err := p.cache.oldestDirty(p.cache.dirtyLen()/2, func(k string, v []byte, present bool) error {
		if present {
			kvs = append(kvs, KV{Key: []byte(k), Value: v})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := p.commitLocked(kvs, nil, "test write-back"); err != nil {
		return err
	}
	p.cache.markWritten(n)
	return nil
}

// TestBufferMoved: moved state lands as dirty entries, in place over a
// key the cache knew, and a key that comes twice keeps one entry with the
// later value.
func TestBufferMoved(t *testing.T) {
	p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true, CacheBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	known := StateKey(nil, "op", 1, "count", []byte("known"))
	if err := p.MultiPut([]KV{{Key: known, Value: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	twice := StateKey(nil, "op", 2, "count", []byte("twice"))
	moved := []KV{
		{Key: known, Value: []byte("new")},
		{Key: twice, Value: []byte("first")},
		{Key: StateKey(nil, "op", 2, "count", []byte("a")), Value: []byte("A")},
		{Key: twice, Value: []byte("second")},
		{Key: StateKey(nil, "op", 3, "count", []byte("b")), Value: []byte("B")},
	}
	var chunk []byte
	for _, kv := range moved {
		chunk = AppendPacked(chunk, kv.Key, kv.Value)
	}
	if err := PutMoved(p, chunk); err != nil {
		t.Fatal(err)
	}
	checkCache(t, "after the moved batch", p.cache)
	want := map[string]string{string(known): "new", string(twice): "second", string(moved[2].Key): "A", string(moved[4].Key): "B"}
	check := func(what string) {
		t.Helper()
		for k, v := range want {
			vals, err := p.MultiGet([][]byte{[]byte(k)})
			if err != nil || string(vals[0]) != v {
				t.Fatalf("%s: %q = %q (err %v), want %q", what, k, vals[0], err, v)
			}
		}
	}
	check("in the cache")
	if err := PutMoved(p, []byte{9, 'x'}); err == nil {
		t.Fatal("a malformed chunk was stored")
	}
	if p.cache.m.len() != 4 {
		t.Fatalf("%d entries, want 4", p.cache.m.len())
	}
	if err := p.Scan(nil, nil, func(_, _ []byte) bool { return true }); err != nil {
		t.Fatal(err) // every buffered write to Pebble
	}
	p.cache.reset()
	check("in Pebble")
}
