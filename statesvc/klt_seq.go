package statesvc

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// hashSeq is a static, sorted sequence of 32-bit values, split like
// Elias-Fano coding: a value's top dbits bits are its group, the other
// rbits = 32 - dbits bits its remainder. Remainders are packed in order,
// rbits each. The groups are not coded in unary (which needs a select
// index and a scan of the bit vector per lookup) but as a directory of
// where each group's elements start, so a lookup reads two adjacent
// directory bytes, a base word, and the group's one or two remainders —
// usually one cache line — and compares them. Duplicates are allowed and
// stay adjacent.
//
// The directory stores each group's start as an 8-bit offset from a 32-bit
// base per block of 1<<bshift groups. bshift is the largest, up to
// hashSeqBlockShift, at which every offset fits in 8 bits — always the
// maximum unless values cluster in a few groups; at bshift 0 every group
// has its own base, which always fits.
//
// Size: dbits is picked so a group holds about hashSeqGroup values (1.4 to
// 2.8 on average), so an element costs 32 - log2(n/2) remainder bits plus
// (8 + 32/32)/2 directory bits: about 32 - log2(n) + 5.5 bits, some 2 bits
// more than unary upper bits with a sampled select index, for one
// dependent memory access fewer and no bit scanning. Remainders, directory
// and bases share one allocation (one size-class rounding, not three).
type hashSeq struct {
	// Read by every batch lookup, so first (one cache line together with
	// the fields kltBucket puts before its seq): the one allocation
	// holding remainders, directory and bases, and where the directory
	// and the bases start in it.
	data    []byte
	dirOff  uint32
	baseOff uint32
	rbits   uint8
	bshift  uint8
	dbits   uint8
	dups    bool // some value occurs more than once

	n    int
	rem  []byte // packed remainders (bit i*rbits, little-endian), then hashSeqPad bytes of padding for whole-word loads
	dir  []byte // start of group g minus the base of its block; 1<<dbits + 1 entries (the last: the end)
	base []byte // little-endian uint32 start of group b<<bshift, for every block b and the end
}

// hashSeqPad is the padding after the remainders: whole-word loads of the
// remainders of up to kltMatchWidth elements starting at any element index
// up to n stay inside the remainders, padding and directory.
const hashSeqPad = 16

const (
	hashSeqGroup      = 2  // average values per group the directory aims at
	hashSeqBlockShift = 5  // groups per 32-bit base: 1 << hashSeqBlockShift
	hashSeqMaxDirBits = 24 // directory of at most 16 Mi groups
)

// emptyHashSeq is the sequence of no values, shared (sequences are never
// modified after newHashSeq).
var emptyHashSeq = newHashSeq(nil)

// hashSeqDirBits is the directory size (in bits of the value) for n values:
// round(log2(n / hashSeqGroup)), at least 0.
func hashSeqDirBits(n int) uint {
	t := uint64(float64(n) * math.Sqrt2 / hashSeqGroup)
	if t < 2 {
		return 0
	}
	return min(uint(bits.Len64(t))-1, hashSeqMaxDirBits)
}

// newHashSeq codes vals, which must be sorted ascending. An empty sequence
// has a directory too (one empty group), so lookups need no special case.
func newHashSeq(vals []uint32) hashSeq {
	n := len(vals)
	d := hashSeqDirBits(n)
	s := hashSeq{n: n, dbits: uint8(d), rbits: uint8(32 - d)}
	ng := 1 << d
	// starts[g] = index of the first value of group g (or later); starts[ng] = n.
	starts := make([]uint32, ng+1)
	g := 0
	for i, v := range vals {
		s.dups = s.dups || i > 0 && vals[i-1] == v
		for vg := int(uint64(v) >> s.rbits); g <= vg; g++ {
			starts[g] = uint32(i)
		}
	}
	for ; g <= ng; g++ {
		starts[g] = uint32(n)
	}
	s.bshift = uint8(min(hashSeqBlockShift, d))
	for s.bshift > 0 && !offsetsFit(starts, uint(s.bshift)) {
		s.bshift--
	}
	remLen := int((uint64(n)*uint64(s.rbits)+7)/8 + hashSeqPad)
	nBase := ng>>s.bshift + 1
	data := make([]byte, remLen+ng+1+4*nBase)
	s.data, s.dirOff, s.baseOff = data, uint32(remLen), uint32(remLen+ng+1)
	s.rem = data[:remLen:remLen]
	s.dir = data[remLen : remLen+ng+1 : remLen+ng+1]
	s.base = data[remLen+ng+1:]
	for b := range nBase {
		binary.LittleEndian.PutUint32(s.base[4*b:], starts[b<<s.bshift])
	}
	for g, st := range starts {
		s.dir[g] = uint8(st - starts[g>>s.bshift<<s.bshift])
	}
	mask := s.mask()
	for i, v := range vals {
		off := uint64(i) * uint64(s.rbits)
		w := binary.LittleEndian.Uint64(s.rem[off>>3:])
		binary.LittleEndian.PutUint64(s.rem[off>>3:], w|(uint64(v)&mask)<<(off&7))
	}
	return s
}

// offsetsFit reports whether every group start fits in 8 bits relative to
// the start of its block of 1<<shift groups.
func offsetsFit(starts []uint32, shift uint) bool {
	for g, st := range starts {
		if st-starts[g>>shift<<shift] > math.MaxUint8 {
			return false
		}
	}
	return true
}

// The shift counts below are masked with 63 (they are at most 32 anyway) so
// the compiler emits plain shifts, without the out-of-range handling Go's
// shift semantics otherwise need: these run several times per lookup.

func (s *hashSeq) mask() uint64 { return 1<<(s.rbits&63) - 1 }

// group returns v's group.
func (s *hashSeq) group(v uint32) uint64 { return uint64(v) >> (s.rbits & 63) }

// start returns the index of the first element of group g (g <= 1<<dbits;
// start(1<<dbits) is n).
func (s *hashSeq) start(g uint64) uint64 {
	b := g >> (s.bshift & 63)
	return uint64(binary.LittleEndian.Uint32(s.base[4*b:4*b+4])) + uint64(s.dir[g])
}

// remAt returns the remainder of element i.
func (s *hashSeq) remAt(i uint64) uint64 {
	off := i * uint64(s.rbits)
	return binary.LittleEndian.Uint64(s.rem[off>>3:]) >> (off & 7) & s.mask()
}

// scan returns the elements equal to v as [i, j) (i == j: none), given the
// bounds [lo, hi) of v's group. It is the inner loop of every lookup.
func (s *hashSeq) scan(v uint32, lo, hi uint64) (i, j uint64) {
	rem, rb, mask := s.rem, uint64(s.rbits), s.mask()
	r := uint64(v) & mask
	off := lo * rb
	for i = lo; i < hi; i, off = i+1, off+rb {
		p := off >> 3
		x := binary.LittleEndian.Uint64(rem[p:p+8]) >> (off & 7) & mask
		if x < r {
			continue
		}
		if x > r {
			return i, i
		}
		for j = i + 1; j < hi && s.remAt(j) == r; j++ {
		}
		return i, j
	}
	return hi, hi
}

// equalRange returns the elements equal to v as [i, j) (i == j: none).
func (s *hashSeq) equalRange(v uint32) (i, j int) {
	g := s.group(v)
	lo, hi := s.scan(v, s.start(g), s.start(g+1))
	return int(lo), int(hi)
}

// each calls fn for every element in order.
func (s *hashSeq) each(fn func(i int, v uint32)) {
	for g := uint64(0); g < 1<<s.dbits; g++ {
		for i, end := s.start(g), s.start(g+1); i < end; i++ {
			fn(int(i), uint32(g<<s.rbits|s.remAt(i)))
		}
	}
}

// bytes is the memory the sequence holds.
func (s *hashSeq) bytes() uint64 { return uint64(len(s.data)) }
