package statesvc

import (
	"encoding/binary"
	"math/bits"
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
// and find its group; (2) touch its directory record; (3) read the group
// bounds, now in cache; (4) touch the group's remainders; (5) compare, now
// in cache, and answer. The touching passes are tight loops of a few
// instructions per key, so the out-of-order core's instruction window
// holds the misses of many keys at once; a loop that also hashed or
// computed bounds would fit only a few. It returns the sum of the touched
// values (for kltSink).
//
// The passes read only a bucket's first cache line (kltBucket.plain,
// owner0 and the hot fields of its sequence) unless a key needs more.
// The scratch arrays are local (on the stack), so storing bucket pointers
// in them needs no GC write barrier.
func (k *KLT) lookupGroup(keys [][]byte, out []string) (sink uint64) {
	var (
		bs     [kltGroupSize]*kltBucket
		hs     [kltGroupSize]uint32
		gs     [kltGroupSize]uint32 // group of hs[i] in bs[i]'s sequence
		lo, hi [kltGroupSize]uint32 // the group's elements: [lo, hi)
	)
	keys = keys[:min(len(keys), kltGroupSize)]
	out = out[:len(keys)]
	pow2 := k.nbMask != 0 || k.nb == 1
	for i, key := range keys {
		var x uint64
		switch len(key) {
		case 8:
			x = keyHash8(binary.LittleEndian.Uint64(key))
		case 16:
			x = keyHash16(binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[8:]))
		default:
			x = keyHash(key)
		}
		var bi uint64
		if pow2 {
			bi = x & k.nbMask // = x % nb, without a division
		} else {
			bi = x % uint64(k.nb)
		}
		b := k.buckets[bi]
		if b == nil {
			b = &kltNoBucket
		}
		h := uint32(x >> 32)
		bs[i], hs[i], gs[i] = b, h, uint32(uint64(h)>>(b.seq.rbits&63))
	}
	for i := range keys {
		s := &bs[i].seq
		g := gs[i]
		sink += uint64(s.data[s.dirByte(g)])
	}
	for i := range keys {
		s := &bs[i].seq
		l, h := s.bounds(gs[i])
		lo[i], hi[i] = l, h
	}
	for i := range keys {
		s := &bs[i].seq
		// Touch every byte kltMatch loads: the group's remainders may
		// run into the next cache line.
		p0, p2 := kltMatchWords(lo[i], hi[i], uint64(s.rbits))
		sink += uint64(s.data[p0]) + uint64(s.data[p0+7]) + uint64(s.data[p2+7])
	}
	for i := range keys {
		b := bs[i]
		at, eq := kltMatch(&b.seq, hs[i], lo[i], hi[i])
		switch {
		case b.plain && eq == 0:
			out[i] = ""
		case b.plain: // one owner, every entry live
			out[i] = k.owners[b.owner0]
		case len(b.extra) > 0 || eq > 1:
			// Unmerged additions (not after flush; kept for safety), or
			// several entries with the hash, maybe of several owners.
			out[i] = k.lookupLocked(keys[i])
		case eq == 0 || b.isDead(int(at)):
			out[i] = ""
		default:
			out[i] = k.owners[b.ownerAt(int(at))]
		}
	}
	return sink
}

// kltMatchWidth is how many elements of a group kltMatch compares without
// a loop: groups hold about 2 elements (about 3 when the key is present),
// so nearly every lookup takes the loop-free path and no branch depends
// on the group's size or contents.
const kltMatchWidth = 4

// kltMatch returns, for the elements [lo, hi) of s (the group of h), the
// first element equal to h and how many are (eq 0: at is meaningless);
// equal elements are adjacent. For up to kltMatchWidth elements of up to
// 28 bits it reads them with two word loads (two elements each) and
// compares without branches: (x ^ r) - 1 has its top bit set iff x == r
// (both below 2^32); the bits of positions past hi are masked off.
func kltMatch(s *hashSeq, h, lo, hi uint32) (at uint32, eq int) {
	d, rb := s.data, uint64(s.rbits&63)
	mask := uint64(1)<<rb - 1
	r := uint64(h) & mask
	n := hi - lo
	o := uint64(lo) * rb
	if n <= kltMatchWidth && rb <= 28 {
		p0, p2 := kltMatchWords(lo, hi, rb)
		w0 := binary.LittleEndian.Uint64(d[p0:p0+8]) >> (o & 7)
		w2 := binary.LittleEndian.Uint64(d[p2:p2+8]) >> ((o + 2*rb) & 7)
		m := ((w0&mask)^r-1)>>63 |
			((w0>>rb&mask)^r-1)>>63<<1 |
			((w2&mask)^r-1)>>63<<2 |
			((w2>>rb&mask)^r-1)>>63<<3
		m &= 1<<n - 1
		return lo + uint32(bits.TrailingZeros64(m)), bits.OnesCount8(uint8(m))
	}
	at = kltMiss
	for i := lo; i < hi; i, o = i+1, o+rb {
		p := o >> 3
		if binary.LittleEndian.Uint64(d[p:p+8])>>(o&7)&mask == r {
			at = min(at, i)
			eq++
		}
	}
	return at, eq
}

// kltMatchWords returns the bytes at which kltMatch loads the two words
// holding the remainders of a group [lo, hi) of up to 4 elements: the
// second only for more than 2 elements, else the first again, so a small
// group near the end of a cache line does not wait for the next line.
func kltMatchWords(lo, hi uint32, rb uint64) (p0, p2 uint64) {
	o := uint64(lo) * rb
	p0, p2 = o>>3, o>>3
	if hi-lo > 2 {
		p2 = (o + 2*rb) >> 3
	}
	return p0, p2
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
