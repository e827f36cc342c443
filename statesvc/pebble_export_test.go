package statesvc

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// TestPebbleExport: an export that hands out the buffered writes instead
// of writing them back returns exactly the keys a plain scan would, each
// once (newest value per key, buffered deletes hiding older values), leaves
// the buffered writes of the whole store buffered, and a range delete then
// drops the range's buffered writes while the other keys' stay readable.
func TestPebbleExport(t *testing.T) {
	for _, cacheBytes := range []int64{0, 64 << 10} { // default, and a budget that forces write-backs
		t.Run(fmt.Sprint(cacheBytes), func(t *testing.T) {
			p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true, CacheBytes: cacheBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
			m.put(0, 2000, 1)
			if err := p.Scan(nil, nil, func(_, _ []byte) bool { return true }); err != nil {
				t.Fatal(err) // everything written back: the next writes shadow values in Pebble
			}
			m.put(500, 1500, 2) // buffered over written-back values, every seventh a delete
			dirtyBefore := p.cache.dirtyLen()
			if cacheBytes == 0 && dirtyBefore == 0 {
				t.Fatal("nothing buffered: the test exercises no merge")
			}
			for b := range 8 {
				lo, hi := BucketRange("op", b, b+1)
				var want, got []string
				for k, v := range m.want {
					if v != nil && bytes.Compare([]byte(k), lo) >= 0 && bytes.Compare([]byte(k), hi) < 0 {
						want = append(want, k+"="+string(v))
					}
				}
				slices.Sort(want)
				err := p.Export(lo, hi, func(k, v []byte) bool {
					got = append(got, string(k)+"="+string(v))
					return true
				})
				if err != nil {
					t.Fatal(err)
				}
				slices.Sort(got) // an export has no order
				if !slices.Equal(got, want) {
					t.Fatalf("bucket %d: Export saw %d keys, want %d (first difference at %d)", b, len(got), len(want), firstDiff(got, want))
				}
			}
			if n := p.cache.dirtyLen(); n != dirtyBefore {
				t.Fatalf("Export left %d buffered writes, want the %d there were", n, dirtyBefore)
			}
			// Stop early: fn's false ends the scan.
			n := 0
			if err := p.Export(nil, nil, func(_, _ []byte) bool { n++; return n < 3 }); err != nil || n != 3 {
				t.Fatalf("Export stopped after %d keys (err %v), want 3", n, err)
			}
			lo, hi := BucketRange("op", 2, 4)
			if err := p.DeleteRange(lo, hi); err != nil {
				t.Fatal(err)
			}
			for k := range m.want {
				if bytes.Compare([]byte(k), lo) >= 0 && bytes.Compare([]byte(k), hi) < 0 {
					m.want[k] = nil
				}
			}
			if cacheBytes == 0 && p.cache.dirtyLen() == 0 {
				t.Fatal("the range delete wrote back or dropped the buffered writes of other buckets")
			}
			m.check("after delete range", p)
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestPebbleMoveOut: a move-out hands out each live key of the range once
// (buffered writes, values on disk, buffered deletes hiding them), then
// the range reads as empty — through the cache and on disk, also after
// the other buffered writes reach Pebble — while every other key keeps its
// newest value; a move fn stops deletes nothing.
func TestPebbleMoveOut(t *testing.T) {
	for _, cacheBytes := range []int64{0, 64 << 10} {
		t.Run(fmt.Sprint(cacheBytes), func(t *testing.T) {
			p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true, CacheBytes: cacheBytes})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
			m.put(0, 2000, 1)
			if err := p.Scan(nil, nil, func(_, _ []byte) bool { return true }); err != nil {
				t.Fatal(err)
			}
			m.put(500, 1500, 2)
			vals, err := p.MultiGet([][]byte{volatileKey(100), volatileKey(1800)}) // clean entries in the cache
			if err != nil || vals[0] == nil {
				t.Fatalf("warm the cache: %v %x", err, vals)
			}
			lo, hi := BucketRange("op", 2, 4)
			in := func(k string) bool { return bytes.Compare([]byte(k), lo) >= 0 && bytes.Compare([]byte(k), hi) < 0 }

			n := 0
			if err := p.MoveOut(lo, hi, func(_, _ []byte) bool { n++; return n < 5 }); err != nil || n != 5 {
				t.Fatalf("stopped move-out saw %d keys (err %v), want 5", n, err)
			}
			m.check("after a stopped move-out", p)

			var want, got []string
			for k, v := range m.want {
				if v != nil && in(k) {
					want = append(want, k+"="+string(v))
				}
			}
			if err := p.MoveOut(lo, hi, func(k, v []byte) bool {
				got = append(got, string(k)+"="+string(v))
				return true
			}); err != nil {
				t.Fatal(err)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("move-out handed out %d keys, want %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
			}
			for k := range m.want {
				if in(k) {
					m.want[k] = nil
				}
			}
			m.check("after the move-out", p)
			if err := p.Scan(nil, nil, func(_, _ []byte) bool { return true }); err != nil {
				t.Fatal(err) // every buffered write to disk
			}
			m.check("after writing back", p)
		})
	}
}
