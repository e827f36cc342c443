package statesvc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// liveKeysIn lists the model's live keys in [lo, hi), sorted.
func (m *volatileModel) liveKeysIn(lo, hi []byte) []string {
	var out []string
	for k, v := range m.want {
		if v != nil && bytes.Compare([]byte(k), lo) >= 0 && (hi == nil || bytes.Compare([]byte(k), hi) < 0) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// TestPebbleExportKeys: a keys-only export of one range, and of several
// at once, returns exactly their live keys, each once (buffered writes
// over written-back values, buffered deletes hiding older ones), without
// writing anything back — the buffered writes of the whole store stay
// buffered — and stops when fn says so. Memory (no buffer) answers the
// same through its scans; ranges out of order are refused.
func TestPebbleExportKeys(t *testing.T) {
	for _, cacheBytes := range []int64{0, 64 << 10} { // default, and a budget that forces write-backs
		t.Run(fmt.Sprint(cacheBytes), func(t *testing.T) {
			p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true, CacheBytes: cacheBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			mem := NewMemory()
			m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
			m.put(0, 2000, 1)
			if err := p.Flush(); err != nil {
				t.Fatal(err) // in Pebble: the next writes shadow these
			}
			m.put(500, 1500, 2) // buffered, every seventh a delete
			var kvs []KV
			for k, v := range m.want {
				if v != nil {
					kvs = append(kvs, KV{Key: []byte(k), Value: v})
				}
			}
			if err := mem.MultiPut(kvs); err != nil {
				t.Fatal(err)
			}
			dirtyBefore := p.cache.dirtyLen()
			if cacheBytes == 0 && dirtyBefore == 0 {
				t.Fatal("nothing buffered: the test exercises no merge")
			}
			r := func(lo, hi int) KeyRange {
				s, e := BucketRange("op", lo, hi)
				return KeyRange{Start: s, End: e}
			}
			for _, ranges := range [][]KeyRange{{r(0, 1)}, {r(3, 4)}, {r(1, 3), r(5, 6), r(7, 8)}, {r(0, 8)}} {
				var want []string
				for _, kr := range ranges {
					want = append(want, m.liveKeysIn(kr.Start, kr.End)...)
				}
				slices.Sort(want)
				for name, s := range map[string]Store{"pebble": p, "memory": mem} {
					var got []string
					if err := ExportKeys(s, ranges, func(k []byte) bool {
						got = append(got, string(k))
						return true
					}); err != nil {
						t.Fatal(err)
					}
					slices.Sort(got)
					if !slices.Equal(got, want) {
						t.Fatalf("%s %d ranges: ExportKeys saw %d keys, want %d (first difference at %d)", name, len(ranges), len(got), len(want), firstDiff(got, want))
					}
				}
			}
			if n := p.cache.dirtyLen(); n != dirtyBefore {
				t.Fatalf("ExportKeys left %d buffered writes, want the %d there were", n, dirtyBefore)
			}
			n := 0
			if err := p.ExportKeys([]KeyRange{{}}, func([]byte) bool { n++; return n < 3 }); err != nil || n != 3 {
				t.Fatalf("ExportKeys stopped after %d keys (err %v), want 3", n, err)
			}
			if err := ExportKeys(p, []KeyRange{r(3, 4), r(1, 2)}, func([]byte) bool { return true }); err == nil {
				t.Fatal("ranges out of order accepted")
			}
			m.check("after the exports", p)
		})
	}
}

// TestFrozenKeys: a lister made over a bucket whose keys are partly in
// Pebble and partly only buffered (values and deletes) lists every live
// key of the bucket, in order, each once, from any key on; after more
// deletes (buffered, then written back with everything else) and with
// the rest of the store still written, it lists no live key less, and
// MultiGet tells the deleted ones apart — what an old owner serving pulls
// relies on. Nothing is written back by the lister itself.
func TestFrozenKeys(t *testing.T) {
	p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
	m.put(0, 1000, 1)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	m.put(0, 2000, 2) // buffered: every bucket has buffered writes and deletes
	lo, hi := BucketRange("op", 3, 4)
	dirty := p.cache.dirtyLen()
	fk, err := FrozenKeys(p, []KeyRange{{Start: lo, End: hi}})
	if err != nil {
		t.Fatal(err)
	}
	if n := p.cache.dirtyLen(); n != dirty {
		t.Fatalf("making the lister wrote back: %d buffered writes left of %d", n, dirty)
	}
	list := func(from []byte) []string {
		var got []string
		if err := fk.Keys(from, hi, func(k []byte) bool {
			got = append(got, string(k))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("listing of %d keys out of order or with a key twice (first: %q)", len(got), got[:min(len(got), 4)])
		}
		return got
	}
	live := func(keys []string) []string {
		bs := make([][]byte, len(keys))
		for i, k := range keys {
			bs[i] = []byte(k)
		}
		vals, err := p.MultiGet(bs)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, v := range vals {
			if v != nil {
				out = append(out, keys[i])
			}
		}
		return out
	}
	want := m.liveKeysIn(lo, hi)
	if got := live(list(lo)); !slices.Equal(got, want) {
		t.Fatalf("listed and present: %d keys, want %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	from := []byte(want[len(want)/2])
	if got := live(list(from)); !slices.Equal(got, want[len(want)/2:]) {
		t.Fatalf("from the middle: %d keys, want %d", len(got), len(want)-len(want)/2)
	}
	n := 0
	if err := fk.Keys(lo, hi, func([]byte) bool { n++; return n < 3 }); err != nil || n != 3 {
		t.Fatalf("Keys stopped after %d keys (err %v), want 3", n, err)
	}
	// Take every other live key (deletes buffered), write the rest of the
	// store on, then write everything back.
	var dels []KV
	for i, k := range want {
		if i%2 == 0 {
			dels = append(dels, KV{Key: []byte(k)})
			m.want[k] = nil
		}
	}
	if err := p.MultiPut(dels); err != nil {
		t.Fatal(err)
	}
	want = m.liveKeysIn(lo, hi)
	listed := list(lo)
	if got := live(listed); !slices.Equal(got, want) {
		t.Fatalf("after the deletes: %d live keys listed, want %d", len(got), len(want))
	}
	if len(listed) == len(want) {
		t.Fatal("the deleted keys are not listed: the test shows no validation by MultiGet")
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := live(list(lo)); !slices.Equal(got, want) {
		t.Fatalf("after the write-back: %d live keys listed, want %d", len(got), len(want))
	}
	mem := NewMemory()
	if err := mem.MultiPut([]KV{{Key: []byte(want[0]), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	ml, err := FrozenKeys(mem, []KeyRange{{Start: lo, End: hi}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := ml.Keys(lo, hi, func(k []byte) bool { got = append(got, string(k)); return true }); err != nil || !slices.Equal(got, want[:1]) {
		t.Fatalf("memory lister: %q, %v", got, err)
	}
	m.check("after the listings", p)
}

// TestPebbleColdReadsAndWrites: cold writes and reads return and keep the
// same values as MultiPut and MultiGet would — over keys in Pebble, keys
// buffered (dirty) and keys cached clean, deletes included — while they
// add no entry to the value cache and leave its hit counts alone.
func TestPebbleColdReadsAndWrites(t *testing.T) {
	p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
	m.put(0, 1000, 1)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	m.put(0, 300, 2) // buffered over Pebble's
	var clean [][]byte
	for i := 300; i < 400; i++ {
		clean = append(clean, volatileKey(i))
	}
	if _, err := p.MultiGet(clean); err != nil { // cached clean
		t.Fatal(err)
	}
	entries, lookups := p.cache.m.len(), p.cache.lookups
	// Cold writes over all three kinds and new keys, every fifth a delete.
	var kvs []KV
	for i := 0; i < 1500; i += 3 {
		k := volatileKey(i)
		v := binary.LittleEndian.AppendUint64(nil, uint64(9000+i))
		if i%5 == 0 {
			v = nil
		}
		kvs = append(kvs, KV{Key: k, Value: v})
		m.want[string(k)] = v
	}
	if err := p.PutCold(kvs); err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 0, 1500)
	for i := range 1500 {
		keys = append(keys, volatileKey(i))
	}
	got, err := p.GetCold(keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if want := m.want[string(k)]; !bytes.Equal(got[i], want) || (got[i] == nil) != (want == nil) {
			t.Fatalf("cold read of %q = %x, want %x", k, got[i], want)
		}
	}
	if n := p.cache.m.len(); n != entries {
		t.Fatalf("the value cache holds %d entries after cold reads and writes, had %d", n, entries)
	}
	if p.cache.lookups != lookups {
		t.Fatalf("cold reads counted %d lookups toward the hit rate", p.cache.lookups-lookups)
	}
	m.check("after cold reads and writes", p)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	m.check("after writing everything back", p)
}
