package statesvc

import (
	"math/bits"
	"slices"
)

// kltBucket holds the lookup entries of one bucket: a multiset of (32-bit
// key hash, owner) pairs. Most entries live in a static sorted sequence of
// the hashes (hashSeq: high bits as a group directory, low bits packed)
// with a packed owner per element (0 bits when the bucket has one owner,
// the usual case) and a dead bit per element (the bitmap is allocated at
// the first removal); recent additions wait in a small sorted buffer that
// is merged into the sequence once it outgrows a fraction of it, so a
// burst of additions costs amortized O(log n) copies per entry and lookups
// never scan an unsorted list.
type kltBucket struct {
	// Read by every batch lookup, so first (with seq's first fields, in
	// about one cache line). fast: the bucket has at most one owner,
	// owner0 (a KLT owner index), no buffered additions and an unclustered
	// directory, so lookupGroup answers its keys from these fields; plain:
	// fast and no removed entries, so a match needs no dead bit.
	fast   bool
	plain  bool
	owner0 uint32
	dead   []uint64 // one bit per seq element; nil until an element is removed
	seq    hashSeq

	owners []uint32 // bucket-local owner index → KLT owner index
	obits  uint     // bits per packed owner
	own    []uint64 // packed bucket-local owner of each seq element
	nDead  int
	extra  []uint64 // sorted hash<<32 | KLT owner index, not yet in seq
}

const (
	kltExtraMin  = 256 // buffer this many additions before the first merge
	kltExtraFrac = 16  // then merge once the buffer reaches len(seq)/16
)

func (b *kltBucket) live() int { return b.seq.n - b.nDead + len(b.extra) }

// setPlain recomputes fast, plain and owner0; every change of the
// bucket's entries ends with it.
func (b *kltBucket) setPlain() {
	b.fast = len(b.owners) <= 1 && b.obits == 0 && len(b.extra) == 0 && !b.seq.wide
	b.plain = b.fast && b.nDead == 0
	b.owner0 = 0
	if b.fast && len(b.owners) == 1 {
		b.owner0 = b.owners[0]
	}
}

func (b *kltBucket) ownerAt(i int) uint32 {
	if b.obits == 0 {
		return b.owners[0]
	}
	off := uint64(i) * uint64(b.obits)
	w, sh := off>>6, off&63
	v := b.own[w] >> sh
	if sh+uint64(b.obits) > 64 {
		v |= b.own[w+1] << (64 - sh)
	}
	return b.owners[v&(1<<b.obits-1)]
}

// isDead reports whether seq element i was removed. Most buckets have no
// removals between rebuilds: then the bitmap is not touched at all.
func (b *kltBucket) isDead(i int) bool {
	return b.nDead > 0 && b.dead[i>>6]&(1<<(i&63)) != 0
}

func (b *kltBucket) kill(i int) {
	if b.dead == nil {
		b.dead = make([]uint64, (b.seq.n+63)/64)
	}
	b.dead[i>>6] |= 1 << (i & 63)
	b.nDead++
	b.setPlain()
}

// extraStart returns the index of the first buffered entry with hash h.
func (b *kltBucket) extraStart(h uint32) int {
	lo, hi := 0, len(b.extra)
	key := uint64(h) << 32
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.extra[m] < key {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// each calls fn for every live entry with hash h until fn returns false.
func (b *kltBucket) each(h uint32, fn func(owner uint32, seqIdx, extraIdx int) bool) {
	for j := b.extraStart(h); j < len(b.extra) && uint32(b.extra[j]>>32) == h; j++ {
		if !fn(uint32(b.extra[j]), -1, j) {
			return
		}
	}
	i, j := b.seq.equalRange(h)
	for ; i < j; i++ {
		if !b.isDead(i) && !fn(b.ownerAt(i), i, -1) {
			return
		}
	}
}

// first returns the owner of a live entry with hash h and whether entries
// of other owners share the hash (then lookups need each). It is the
// lookup hot path, so it loops without the closure of each.
func (b *kltBucket) first(h uint32) (owner uint32, ok, more bool) {
	for j := b.extraStart(h); j < len(b.extra) && uint32(b.extra[j]>>32) == h; j++ {
		if o := uint32(b.extra[j]); !ok {
			owner, ok = o, true
		} else if o != owner {
			return owner, true, true
		}
	}
	i, j := b.seq.equalRange(h)
	return b.firstFrom(i, j, owner, ok)
}

// firstFrom finishes first from the sequence's elements [i, j) equal to the
// hash, given what the buffer held.
func (b *kltBucket) firstFrom(i, j int, owner uint32, ok bool) (uint32, bool, bool) {
	for ; i < j; i++ {
		if b.isDead(i) {
			continue
		}
		if o := b.ownerAt(i); !ok {
			owner, ok = o, true
		} else if o != owner {
			return owner, true, true
		}
	}
	return owner, ok, false
}

// add inserts one entry.
func (b *kltBucket) add(h, owner uint32) {
	e := uint64(h)<<32 | uint64(owner)
	j, _ := slices.BinarySearch(b.extra, e)
	b.extra = slices.Insert(b.extra, j, e)
	b.fast, b.plain = false, false
	if len(b.extra) >= max(kltExtraMin, b.seq.n/kltExtraFrac) {
		b.rebuild(-1)
	}
}

// addSorted inserts one entry per hash of hs (sorted) in one merge with
// the buffer, rebuilding at most once.
func (b *kltBucket) addSorted(hs []uint32, owner uint32) {
	merged := make([]uint64, 0, len(b.extra)+len(hs))
	i := 0
	for _, h := range hs {
		e := uint64(h)<<32 | uint64(owner)
		for ; i < len(b.extra) && b.extra[i] < e; i++ {
			merged = append(merged, b.extra[i])
		}
		merged = append(merged, e)
	}
	b.extra = append(merged, b.extra[i:]...)
	b.fast, b.plain = false, false
	if len(b.extra) >= max(kltExtraMin, b.seq.n/kltExtraFrac) {
		b.rebuild(-1)
	}
}

// remove drops one live entry (h, owner); it reports whether there was one.
func (b *kltBucket) remove(h, owner uint32) bool {
	found := false
	b.each(h, func(o uint32, si, ej int) bool {
		if o != owner {
			return true
		}
		if si >= 0 {
			b.kill(si)
		} else {
			b.extra = slices.Delete(b.extra, ej, ej+1)
			b.setPlain()
		}
		found = true
		return false
	})
	if found && b.nDead > 64 && b.nDead > b.seq.n/2 {
		b.rebuild(-1)
	}
	return found
}

// dropOwner removes every entry of owner and returns how many there were.
func (b *kltBucket) dropOwner(owner uint32) int {
	before := b.live()
	b.rebuild(int64(owner))
	return before - b.live()
}

// entries calls fn for every live entry, sorted by hash.
func (b *kltBucket) entries(fn func(h, owner uint32)) {
	j := 0
	b.seq.each(func(i int, h uint32) {
		for ; j < len(b.extra) && uint32(b.extra[j]>>32) < h; j++ {
			fn(uint32(b.extra[j]>>32), uint32(b.extra[j]))
		}
		if !b.isDead(i) {
			fn(h, b.ownerAt(i))
		}
	})
	for ; j < len(b.extra); j++ {
		fn(uint32(b.extra[j]>>32), uint32(b.extra[j]))
	}
}

// rebuild merges the buffer into a fresh sequence without dead entries
// (and without the entries of owner drop, if drop >= 0).
func (b *kltBucket) rebuild(drop int64) {
	n := b.live()
	hs := make([]uint32, 0, n)
	os := make([]uint32, 0, n)
	b.entries(func(h, o uint32) {
		if int64(o) != drop {
			hs, os = append(hs, h), append(os, o)
		}
	})
	*b = kltBucket{seq: emptyHashSeq}
	defer b.setPlain()
	if len(hs) == 0 {
		return
	}
	b.seq = newHashSeq(hs)
	for _, o := range os {
		if !slices.Contains(b.owners, o) {
			b.owners = append(b.owners, o)
		}
	}
	if len(b.owners) == 1 {
		return
	}
	b.obits = uint(bits.Len(uint(len(b.owners) - 1)))
	b.own = make([]uint64, (uint64(len(hs))*uint64(b.obits)+63)/64+1)
	for i, o := range os {
		v := uint64(slices.Index(b.owners, o))
		off := uint64(i) * uint64(b.obits)
		w, sh := off>>6, off&63
		b.own[w] |= v << sh
		if sh+uint64(b.obits) > 64 {
			b.own[w+1] |= v >> (64 - sh)
		}
	}
}

func (b *kltBucket) bytes() uint64 {
	return b.seq.bytes() + uint64(4*cap(b.owners)+8*cap(b.own)+8*cap(b.dead)+8*cap(b.extra)) + 160
}
