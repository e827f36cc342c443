package dataplane

import (
	"math"
	"math/rand/v2"
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
		addUser(x, []byte(a))
		addUser(x, []byte(b))
		addUser(x, []byte("other"))
	}
	got, ok := x.take([]int{bucket}, false)
	if !ok {
		t.Fatal("index incomplete")
	}
	if n := countOf(got[0], h); n != 2 {
		t.Fatalf("keys %q and %q (hash %08x, bucket %d): %d entries handed over, want 2 (hashes %v)", a, b, h, bucket, n, got[0])
	}
	addUser(x, []byte(a))
	x.invalidate()
	if _, ok := x.take([]int{bucket}, false); ok {
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
// and repetition of the writes, including keys written as fresh (not
// searched for) that the index already holds, as a deleted key's is, and
// rewrites of keys read from the store (hintStored, not added again).
func TestLocalIndexMerge(t *testing.T) {
	const nb = 8
	ks := &keyedState{opName: "count", buckets: nb}
	x := newLocalIndex(nb)
	want := make([][]uint32, nb)
	for i := range 50_000 {
		k := []byte("k" + strconv.Itoa(i))
		hint := hintNone
		if i%3 != 0 {
			hint = hintAbsent
		}
		x.addWrites([]statesvc.KV{{Key: ks.stateKey("count", k)}}, []indexHint{hint})
		if i%13 == 0 { // a rewrite of a key the batch read from the store
			held := ks.stateKey("count", []byte("k"+strconv.Itoa(i/4)))
			x.addWrites([]statesvc.KV{{Key: held}}, []indexHint{hintStored})
		}
		if i%7 == 0 {
			addUser(x, []byte("k"+strconv.Itoa(i/2))) // a rewrite
		}
		if i%11 == 0 { // a rewrite, as fresh
			old := ks.stateKey("count", []byte("k"+strconv.Itoa(i/3)))
			x.addWrites([]statesvc.KV{{Key: old}, {Key: old}}, []indexHint{hintAbsent, hintAbsent})
		}
		bk, h := statesvc.KLTHash(k, nb)
		want[bk] = append(want[bk], h)
	}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	got, ok := x.take(all, false)
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

// BenchmarkLocalIndexRewrites: the index's cost of a batch of 1000
// writes over 200 K indexed keys (q6*'s sellers at 128 buckets), each key
// read from the store first as a keyed batch does: "search" without what
// the read found (every key looked up in its bucket), "hinted" with it
// (1 in 50 absent and added, the rest held and skipped).
func BenchmarkLocalIndexRewrites(b *testing.B) {
	const keys, batch = 200_000, 1000
	ks := &keyedState{opName: "count", buckets: 128}
	state := func(i int) statesvc.KV {
		return statesvc.KV{Key: ks.stateKey("count", []byte("k"+strconv.Itoa(i))), Value: []byte{1}}
	}
	all := make([]statesvc.KV, 0, keys)
	for i := range keys {
		all = append(all, state(i))
	}
	for _, hinted := range []bool{false, true} {
		name := "search"
		if hinted {
			name = "hinted"
		}
		b.Run(name, func(b *testing.B) {
			x := newLocalIndex(128)
			x.addKVs(all)
			kvs := make([]statesvc.KV, batch)
			hints := make([]indexHint, batch)
			n := 0
			for b.Loop() {
				for i := range kvs {
					if i%50 == 0 {
						kvs[i], hints[i] = state(keys+n*batch+i), hintAbsent
					} else {
						kvs[i], hints[i] = all[(n*7919+i*104729)%keys], hintStored
					}
				}
				if hinted {
					x.addWrites(kvs, hints)
				} else {
					x.addWrites(kvs, nil)
				}
				n++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*batch), "ns/key")
		})
	}
}

// containsHash answers as a binary search does, for uniform hashes and for
// sets no interpolation guesses well (clustered, powers of two, tiny).
func TestContainsHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	sets := map[string][]uint64{"empty": nil, "one": {42}, "ends": {0, math.MaxUint64}}
	for _, n := range []int{2, 15, 16, 17, 100, 5000} {
		var uniform, clustered, pow []uint64
		for i := range n {
			uniform = append(uniform, rng.Uint64())
			clustered = append(clustered, uint64(i)*3)
			pow = append(pow, 1<<(i%64)+uint64(i/64))
		}
		clustered = append(clustered, math.MaxUint64-1)
		for name, s := range map[string][]uint64{"uniform": uniform, "clustered": clustered, "pow": pow} {
			slices.Sort(s)
			sets[name+strconv.Itoa(n)] = slices.Compact(s)
		}
	}
	for name, s := range sets {
		probes := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1}
		for _, v := range s {
			probes = append(probes, v, v-1, v+1)
		}
		for range 200 {
			probes = append(probes, rng.Uint64())
		}
		for _, h := range probes {
			_, want := slices.BinarySearch(s, h)
			if got := containsHash(s, h); got != want {
				t.Fatalf("%s: containsHash(%#x) = %v, want %v", name, h, got, want)
			}
		}
	}
}

// BenchmarkContainsHash looks up new (absent) uniform hashes in a bucket
// of 40 K, a task's share of the keyed counter over 10 M keys at 128
// buckets, against slices.BinarySearch.
func BenchmarkContainsHash(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const buckets, per = 128, 40_000
	sets := make([][]uint64, buckets)
	for i := range sets {
		for range per {
			sets[i] = append(sets[i], rng.Uint64())
		}
		slices.Sort(sets[i])
	}
	probes := make([]uint64, 1<<16)
	for i := range probes {
		probes[i] = rng.Uint64()
	}
	for _, v := range []struct {
		name string
		fn   func([]uint64, uint64) bool
	}{
		{"interpolation", containsHash},
		{"binary", func(s []uint64, h uint64) bool { _, ok := slices.BinarySearch(s, h); return ok }},
	} {
		b.Run(v.name, func(b *testing.B) {
			n := 0
			for i := 0; b.Loop(); i++ {
				h := probes[i%len(probes)]
				if v.fn(sets[h%buckets], h) {
					n++
				}
			}
			_ = n
		})
	}
}

// addUser indexes one user key as a bulk move's install does.
func addUser(x *localIndex, user []byte) { x.addMoved([]uint64{statesvc.KeyHash(user)}) }
