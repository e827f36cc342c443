package statesvc

import (
	"encoding/binary"
	"slices"
	"sync/atomic"
)

// LookupBatch looks up every key under one lock acquisition and appends the
// owners to dst, aligned with keys; "" marks a key that is local. This is
// the per-batch path of a stateful operator.
func (k *KLT) LookupBatch(keys [][]byte, dst []string) []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	k.flush()
	if k.live == 0 {
		for range keys {
			dst = append(dst, "")
		}
		return dst
	}
	n := len(dst)
	dst = slices.Grow(dst, len(keys))[:n+len(keys)]
	var sink uint64
	for base := 0; base < len(keys); base += kltGroupSize {
		end := min(base+kltGroupSize, len(keys))
		sink += k.lookupGroup(keys[base:end], dst[n+base:n+end])
	}
	kltSink.Store(sink)
	return dst
}

// kltGroupSize is how many keys lookupGroup resolves together: enough for
// the memory accesses of one pass to overlap, few enough for its scratch
// arrays to stay in the L1 cache.
const kltGroupSize = 64

// kltSink receives lookupGroup's touch sums so the compiler keeps the loads.
var kltSink atomic.Uint64

// kltNoBucket stands for a bucket without entries in lookupGroup, so its
// passes need no nil checks. It is never modified.
var kltNoBucket = kltBucket{seq: emptyHashSeq}

// lookupGroup resolves up to kltGroupSize keys into out (as long as keys)
// in passes, so the cache misses of different keys overlap (memory-level
// parallelism) instead of queueing one behind the other: (1) hash every key
// and find its group; (2) touch each key's directory entry; (3) read the
// group bounds, now in cache; (4) touch the group's remainders; (5)
// compare, now in cache. The touching passes are tight loops of a few
// instructions per key, so the out-of-order core's instruction window
// holds the misses of many keys at once; a loop that also hashed or
// computed bounds would fit only a few. It returns the sum of the touched
// values (for kltSink).
//
// The scratch arrays are local (on the stack), so storing bucket pointers
// in them needs no GC write barrier.
func (k *KLT) lookupGroup(keys [][]byte, out []string) (sink uint64) {
	var (
		bs     [kltGroupSize]*kltBucket
		hs     [kltGroupSize]uint32
		gs     [kltGroupSize]uint32 // group of hs[i] in bs[i]'s sequence
		lo, hi [kltGroupSize]uint32 // the group's elements: [lo, hi)
		off    [kltGroupSize]uint32 // byte of the group's first remainder
	)
	keys = keys[:min(len(keys), kltGroupSize)]
	out = out[:len(keys)]
	for i, key := range keys {
		x := keyHash(key)
		var bi uint64
		if k.nbMask != 0 || k.nb == 1 {
			bi = x & k.nbMask // = x % nb, without a division
		} else {
			bi = x % uint64(k.nb)
		}
		b := k.buckets[bi]
		if b == nil {
			b = &kltNoBucket
		}
		h := uint32(x >> 32)
		bs[i], hs[i], gs[i] = b, h, uint32(b.seq.group(h))
	}
	for i := range keys {
		sink += uint64(bs[i].seq.dir[gs[i]])
	}
	for i := range keys {
		s := &bs[i].seq
		g := uint64(gs[i])
		l := s.start(g)
		lo[i], hi[i], off[i] = uint32(l), uint32(s.start(g+1)), uint32(l*uint64(s.rbits)>>3)
	}
	for i := range keys {
		sink += uint64(bs[i].seq.rem[off[i]])
	}
	kltMatch(&bs, &hs, &lo, &hi, len(keys))
	for i := range keys {
		b, at := bs[i], lo[i]
		switch {
		case at == kltMiss && len(b.extra) == 0:
			out[i] = ""
		case at == kltSeveral || b.nDead > 0 || len(b.extra) > 0:
			// Several entries with the hash, removed entries, or
			// unmerged additions (not after flush; kept for safety).
			out[i] = k.lookupLocked(keys[i])
		default:
			out[i] = k.owners[b.ownerAt(int(at))]
		}
	}
	return sink
}

// kltMatch sets lo[i] to the first element equal to hs[i] in bs[i]'s
// sequence among [lo[i], hi[i]) (the loop of hashSeq.scan, inlined), or to
// kltMiss or kltSeveral, for the first n keys. A function of its own with
// no calls, so the compiler keeps the loop in registers.
func kltMatch(bs *[kltGroupSize]*kltBucket, hs, lo, hi *[kltGroupSize]uint32, n int) {
	for i := range n {
		s := &bs[i].seq
		l, h := uint64(lo[i]), uint64(hi[i])
		rb, mask, rem := uint64(s.rbits), s.mask(), s.rem
		r := uint64(hs[i]) & mask
		at := kltMiss
		for ; l < h; l++ {
			o := l * rb
			x := binary.LittleEndian.Uint64(rem[o>>3:]) >> (o & 7) & mask
			if x < r {
				continue
			}
			if x == r {
				at = uint32(l)
				if s.dups && l+1 < h && s.remAt(l+1) == r {
					at = kltSeveral
				}
			}
			break
		}
		lo[i] = at
	}
}

// Markers lookupGroup stores instead of an element index (sequences hold
// fewer than 2^32-2 elements).
const (
	kltMiss    = ^uint32(0)     // no element with the key's hash
	kltSeveral = ^uint32(0) - 1 // more than one
)

// answer is the lookup answer for key given kltBucket.first's result.
func (k *KLT) answer(key []byte, o uint32, ok, more bool) string {
	switch {
	case !ok:
		return ""
	case !more:
		return k.owners[o]
	}
	return k.lookupLocked(key)
}
