package statesvc

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
)

// LookupBatchRefs looks up every key under one lock acquisition — the
// per-batch path of a stateful operator — and appends one ref per key to
// dst: 0 for a key that is local, r > 0 for one whose value is held by
// names[r-1] (several owners joined with OwnerSep when entries of several
// match). Answering with refs, not owner strings, keeps the per-key output
// to one 4-byte store; names is a snapshot, valid after the table changes.
func (k *KLT) LookupBatchRefs(keys [][]byte, dst []uint32) (refs []uint32, names []string) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	k.flush()
	n := len(dst)
	dst = slices.Grow(dst, len(keys))[:n+len(keys)]
	out := dst[n:]
	if k.live == 0 {
		clear(out)
		return dst, nil
	}
	names = k.owners[:len(k.owners):len(k.owners)]
	var slow []int
	for base := 0; base < len(keys); base += kltGroupSize {
		end := min(base+kltGroupSize, len(keys))
		slow = k.lookupGroup(keys[base:end], out[base:end], base, slow)
	}
	for _, i := range slow {
		var r uint32
		r, names = k.slowRef(keys[i], names)
		out[i] = r
	}
	return dst, names
}

// LookupBatch is LookupBatchRefs answering with owner names ("" for a
// local key), appended to dst.
func (k *KLT) LookupBatch(keys [][]byte, dst []string) []string {
	refs, names := k.LookupBatchRefs(keys, make([]uint32, 0, len(keys)))
	for _, r := range refs {
		if r == 0 {
			dst = append(dst, "")
		} else {
			dst = append(dst, names[r-1])
		}
	}
	return dst
}

// slowRef answers a key lookupGroup left to the general path, appending
// to names a joined answer it does not hold yet.
func (k *KLT) slowRef(key []byte, names []string) (uint32, []string) {
	o := k.lookupLocked(key)
	switch {
	case o == "":
		return 0, names
	case !strings.Contains(o, OwnerSep):
		return k.ownerIdx[o] + 1, names
	}
	if i := slices.Index(names[len(k.owners):], o); i >= 0 {
		return uint32(len(k.owners) + i + 1), names
	}
	names = append(names, o) // copies: the snapshot's capacity is its length
	return uint32(len(names)), names
}

// kltGroupSize is how many keys lookupGroup resolves together: enough for
// the memory accesses of one pass to overlap, few enough for its scratch
// arrays to stay in the L1 cache.
const kltGroupSize = 64

// kltSlowGroup marks, in lookupGroup's group sizes, a key left to the
// general path.
const kltSlowGroup = ^uint32(0)

// kltNoBucket stands for a bucket without entries in lookupGroup, so its
// passes need no nil checks. It is never modified.
var kltNoBucket = newKLTNoBucket()

func newKLTNoBucket() kltBucket {
	b := kltBucket{seq: emptyHashSeq}
	b.setPlain()
	return b
}

// lookupGroup resolves up to kltGroupSize keys into out (as long as keys)
// in three passes, so the cache misses of different keys overlap
// (memory-level parallelism) instead of queueing one behind the other:
// (1) hash each key, read its group's bounds from the directory record;
// (2) load the words holding the group's remainders; (3) compare, now in
// cache, and answer. Groups of more than kltMatchWidth elements are
// scanned (kltScanGroup); keys of buckets that are not fast (several
// owners, buffered additions, a wide directory) are appended to slow (as
// first+index) for the general path; it returns slow.
//
// Every read is an ordinary bounds-checked slice access: these passes
// run only while the table has entries, that is during a migration, when
// a batch spends milliseconds fetching and storing values, so the few
// checks per key are not worth giving up memory safety for. The checks
// never fail: a group index is below 1<<dbits, so its directory
// record lies inside the directory; a group start is at most n, and the
// remainder words loaded for elements lo and lo+2 end within hashSeqPad
// bytes of the remainders' end (rbits <= 28). A slow key reads the first
// words of data (at least 64 bytes) instead.
func (k *KLT) lookupGroup(keys [][]byte, out []uint32, first int, slow []int) []int {
	var (
		bs     [kltGroupSize]*kltBucket
		hs     [kltGroupSize]uint32
		lo, ns [kltGroupSize]uint32
		w0, w2 [kltGroupSize]uint64
	)
	keys = keys[:min(len(keys), kltGroupSize)]
	out = out[:len(keys)]
	pow2 := k.nbMask != 0 || k.nb == 1
	for i, key := range keys {
		var x uint64
		// 8- and 16-byte keys (the usual fixed-size record keys) take
		// straight-line hashes small enough to be inlined here.
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
		bs[i], hs[i] = b, h
		if !b.fast {
			lo[i], ns[i] = 0, kltSlowGroup
			continue
		}
		s := &b.seq
		g := uint32(uint64(h) >> (s.rbits & 63))
		// One check for the whole record: the constant offsets below are
		// then known to be in bounds (j < hashSeqBlock = 59).
		rec := (*[64]byte)(s.data[int(s.dirOff)+int(g/hashSeqBlock)*64:])
		j := g % hashSeqBlock
		start := binary.LittleEndian.Uint32(rec[:4])
		l := start + uint32(rec[4+j])
		lo[i], ns[i] = l, start+uint32(rec[5+j])-l
	}
	for i := range keys {
		s := &bs[i].seq
		w0[i], w2[i] = kltGroupWords(s, lo[i], ns[i])
	}
	for i := range keys {
		b := bs[i]
		n := ns[i]
		var m uint64
		switch {
		case n <= kltMatchWidth:
			m = kltGroupMatch(w0[i], w2[i], hs[i], uint64(b.seq.rbits), n)
		case n == kltSlowGroup:
			slow = append(slow, first+i)
			continue
		default:
			m = kltScanGroup(&b.seq, hs[i], lo[i], n)
		}
		switch {
		case m == 0:
			out[i] = 0
		case b.plain: // one owner, every entry live
			out[i] = b.owner0 + 1
		case m&(m-1) != 0: // several entries, some maybe removed
			slow = append(slow, first+i)
		case b.isDead(int(lo[i]) + bits.TrailingZeros64(m)):
			out[i] = 0
		default:
			out[i] = b.owner0 + 1
		}
	}
	return slow
}

// kltMatchWidth is how many elements of a group kltGroupMatch compares:
// groups hold about 2 elements (about 3 when the key is present), so
// nearly every lookup takes the branch-free path.
const kltMatchWidth = 4

// kltGroupWords loads the two little-endian words holding the remainders
// of the group of n <= kltMatchWidth elements starting at lo, each shifted
// so its first remainder starts at bit 0: elements lo and lo+1 in the
// first, lo+2 and lo+3 in the second. A group of at most 2 elements loads
// the first word twice, so it does not wait for a next cache line. See
// lookupGroup for why the loads are in bounds; a slow key (n ==
// kltSlowGroup, lo 0) loads the data's first bytes.
func kltGroupWords(s *hashSeq, lo, n uint32) (w0, w2 uint64) {
	d := s.data
	rb := uint64(s.rbits & 63)
	o := uint64(lo) * rb
	o2 := o + 2*rb
	if n <= 2 {
		o2 = o
	}
	w0 = binary.LittleEndian.Uint64(d[o>>3:o>>3+8]) >> (o & 7)
	w2 = binary.LittleEndian.Uint64(d[o2>>3:o2>>3+8]) >> (o2 & 7)
	return w0, w2
}

// kltScanGroup is kltGroupMatch for a group of more than kltMatchWidth
// elements (at most 255 with an unclustered directory): a bit per element
// for the first 64, then, if one of the rest matches, bit 63 for it
// (callers need only whether there are several matches and the first).
func kltScanGroup(s *hashSeq, h uint32, lo, n uint32) (m uint64) {
	d := s.data
	rb := uint64(s.rbits & 63)
	mask := uint64(1)<<rb - 1
	r := uint64(h) & mask
	o := uint64(lo) * rb
	for i := uint32(0); i < n; i, o = i+1, o+rb {
		if binary.LittleEndian.Uint64(d[o>>3:])>>(o&7)&mask == r {
			m |= 1 << min(i, 63)
		}
	}
	return m
}

// kltGroupMatch returns a bit per element of a group of n <=
// kltMatchWidth elements (bit i: element lo+i) set iff its rb-bit
// remainder (rb <= 28) equals h's, given kltGroupWords' words. It
// compares without branches: (x ^ r) - 1 has its top bit set iff x == r
// (both below 2^32); bits past n are masked off.
func kltGroupMatch(w0, w2 uint64, h uint32, rb uint64, n uint32) uint64 {
	rb &= 63
	mask := uint64(1)<<rb - 1
	r := uint64(h) & mask
	m := ((w0&mask)^r-1)>>63 |
		((w0>>rb&mask)^r-1)>>63<<1 |
		((w2&mask)^r-1)>>63<<2 |
		((w2>>rb&mask)^r-1)>>63<<3
	return m & (1<<(n&63) - 1)
}
