package dataplane

import (
	"slices"
	"strconv"
	"testing"

	"koala/statesvc"
)

// Two keys whose lookup table hashes collide are two entries, as a
// listing hands them over: the new owner's table must keep one for each.
// Keys are counted once however often they are written, and an index
// made incomplete hands over nothing until rebuilt.
func TestLocalIndexCountsKeys(t *testing.T) {
	const nb = 4
	// Find two keys of one bucket with the same 32-bit hash.
	seen := map[[2]uint64]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		k := "key" + strconv.Itoa(i)
		bk, h := statesvc.KLTHash([]byte(k), nb)
		id := [2]uint64{uint64(bk), uint64(h)}
		if prev, ok := seen[id]; ok {
			a, b = prev, k
		}
		seen[id] = k
	}
	bucket, h := statesvc.KLTHash([]byte(a), nb)
	x := newLocalIndex(nb)
	for range 3 {
		x.addUser([]byte(a))
		x.addUser([]byte(b))
		x.addUser([]byte("other"))
	}
	got, ok := x.take([]int{bucket})
	if !ok {
		t.Fatal("index incomplete")
	}
	if n := countOf(got[0], h); n != 2 {
		t.Fatalf("keys %q and %q (hash %08x, bucket %d): %d entries handed over, want 2 (hashes %v)", a, b, h, bucket, n, got[0])
	}
	x.addUser([]byte(a))
	x.invalidate()
	if _, ok := x.take([]int{bucket}); ok {
		t.Fatal("an invalidated index handed keys over")
	}
}

func countOf(hs []uint32, h uint32) int {
	n := 0
	for _, x := range hs {
		if x == h {
			n++
		}
	}
	return n
}

// Many keys through the merge: every key once, sorted, whatever the order
// and repetition of the writes.
func TestLocalIndexMerge(t *testing.T) {
	const nb = 8
	x := newLocalIndex(nb)
	want := make([][]uint32, nb)
	for i := range 50_000 {
		k := []byte("k" + strconv.Itoa(i))
		x.addUser(k)
		if i%7 == 0 {
			x.addUser([]byte("k" + strconv.Itoa(i/2))) // a rewrite
		}
		bk, h := statesvc.KLTHash(k, nb)
		want[bk] = append(want[bk], h)
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	got, ok := x.take(all)
	if !ok {
		t.Fatal("index incomplete")
	}
	for bk := range nb {
		slices.Sort(want[bk])
		if !slices.Equal(got[bk], want[bk]) {
			t.Fatalf("bucket %d: %d hashes, want %d", bk, len(got[bk]), len(want[bk]))
		}
	}
}

// BenchmarkLocalIndexAdd: what the key index costs a task's write of one
// key (a batch of 1000 writes, mostly to keys it already holds, over 1 M
// indexed keys), the price of a handoff without a listing.
func BenchmarkLocalIndexAdd(b *testing.B) {
	const keys, batch = 1 << 20, 1000
	ks := &keyedState{opName: "count", buckets: 128}
	x := newLocalIndex(128)
	state := func(i int) statesvc.KV {
		return statesvc.KV{Key: ks.stateKey("count", []byte("k"+strconv.Itoa(i))), Value: []byte{1}}
	}
	all := make([]statesvc.KV, 0, keys)
	for i := range keys {
		all = append(all, state(i))
	}
	x.addKVs(all)
	kvs := make([]statesvc.KV, batch)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := range kvs {
			// 1 in 50 writes creates a key.
			if i%50 == 0 {
				kvs[i] = state(keys + n*batch + i)
			} else {
				kvs[i] = all[(n*7919+i*104729)%keys]
			}
		}
		x.addKVs(kvs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
}
