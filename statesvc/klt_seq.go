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
// where each group's elements start, so a lookup reads one directory
// record (one cache line) and the group's one or two remainders (usually
// one more) and compares them. Duplicates are allowed and stay adjacent.
//
// The directory is a sequence of 64-byte records, one per block of
// hashSeqBlock groups: the 32-bit start of the block's first group, then
// each group's start as an 8-bit offset from it, and the block's end, so
// a group's bounds come from one record: one cache line, as the directory
// starts at a multiple of 64 bytes in its allocation (and Go aligns the
// size classes of all but small sequences to 64 bytes). Offsets
// fit unless values cluster (more than 255 in a block, e.g. a value added
// hundreds of times): then the sequence is wide and its directory holds
// every group's start as a 32-bit value instead.
//
// Size: dbits is picked so a group holds about hashSeqGroup values (1.4 to
// 2.8 on average), so an element costs 32 - log2(n/2) remainder bits plus
// (64*8/59)/2 directory bits: about 32 - log2(n) + 5.3 bits, some 2 bits
// more than unary upper bits with a sampled select index, for one
// dependent memory access fewer and no bit scanning. Remainders and
// directory share one allocation (one size-class rounding, not two).
type hashSeq struct {
	// Read by every batch lookup, so first (one cache line together with
	// the fields kltBucket puts before its seq): the one allocation
	// holding remainders and directory, where the directory starts in it
	// (a multiple of 64), and its layout.
	data   []byte
	dirOff uint32
	rbits  uint8
	dbits  uint8
	wide   bool // the directory holds 32-bit group starts, not records
	dups   bool // some value occurs more than once

	n   int
	rem []byte // packed remainders (bit i*rbits, little-endian), then hashSeqPad bytes of padding for whole-word loads
	dir []byte // the records of every block (or, if wide, the little-endian uint32 start of every group and the end)
}

const (
	hashSeqGroup      = 2  // average values per group the directory aims at
	hashSeqBlock      = 59 // groups per directory record: 4 + 59 + 1 bytes
	hashSeqPad        = 16 // bytes after the remainders, for whole-word loads (kltGroupWords' past a group's end too)
	hashSeqMaxDirBits = 24 // directory of at most 16 Mi groups
	// hashSeqMinDirBits keeps remainders to at most 28 bits, so two fit
	// one word load at any bit offset (kltGroupMatch). It costs nothing:
	// 16 groups fit the one directory record even an empty sequence has.
	hashSeqMinDirBits = 4
)

// emptyHashSeq is the sequence of no values, shared (sequences are never
// modified after newHashSeq).
var emptyHashSeq = newHashSeq(nil)

// hashSeqDirBits is the directory size (in bits of the value) for n values:
// round(log2(n / hashSeqGroup)), within [hashSeqMinDirBits,
// hashSeqMaxDirBits].
func hashSeqDirBits(n int) uint {
	t := uint64(float64(n) * math.Sqrt2 / hashSeqGroup)
	if t < 2 {
		return hashSeqMinDirBits
	}
	return min(max(uint(bits.Len64(t))-1, hashSeqMinDirBits), hashSeqMaxDirBits)
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
	remLen := int((uint64(n)*uint64(s.rbits)+7)/8 + hashSeqPad)
	dirOff := (remLen + 63) &^ 63
	nRec := (ng + hashSeqBlock - 1) / hashSeqBlock
	s.wide = !offsetsFit(starts)
	dirLen := 64 * nRec
	if s.wide {
		dirLen = 4 * (ng + 1)
	}
	data := make([]byte, dirOff+dirLen)
	s.data, s.dirOff = data, uint32(dirOff)
	s.rem = data[:remLen:remLen]
	s.dir = data[dirOff:]
	for g, st := range starts {
		if s.wide {
			binary.LittleEndian.PutUint32(s.dir[4*g:], st)
			continue
		}
		b, j := g/hashSeqBlock, g%hashSeqBlock
		if j == 0 && g > 0 { // the end of the previous block
			s.dir[64*b-1] = uint8(st - starts[(b-1)*hashSeqBlock])
		}
		if b < nRec {
			if j == 0 {
				binary.LittleEndian.PutUint32(s.dir[64*b:], st)
			}
			s.dir[64*b+4+j] = uint8(st - starts[b*hashSeqBlock])
		}
	}
	mask := s.mask()
	for i, v := range vals {
		off := uint64(i) * uint64(s.rbits)
		w := binary.LittleEndian.Uint64(s.rem[off>>3:])
		binary.LittleEndian.PutUint64(s.rem[off>>3:], w|(uint64(v)&mask)<<(off&7))
	}
	return s
}

// offsetsFit reports whether every block's group starts, and its end, fit
// in 8 bits relative to the block's first group start.
func offsetsFit(starts []uint32) bool {
	for b := 0; b < len(starts)-1; b += hashSeqBlock {
		if starts[min(b+hashSeqBlock, len(starts)-1)]-starts[b] > math.MaxUint8 {
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

// bounds returns the elements of group g (g < 1<<dbits) as [lo, hi): for
// an unclustered sequence from one directory record, whose bytes the
// compiler knows to be in bounds once the record is sliced.
func (s *hashSeq) bounds(g uint32) (lo, hi uint32) {
	d := s.data
	if s.wide {
		o := s.dirOff + 4*g
		w := d[o : o+8]
		return binary.LittleEndian.Uint32(w), binary.LittleEndian.Uint32(w[4:])
	}
	o, j := s.dirOff+g/hashSeqBlock*64, g%hashSeqBlock
	rec := (*[64]byte)(d[o:])
	base := binary.LittleEndian.Uint32(rec[:4])
	return base + uint32(rec[4+j]), base + uint32(rec[5+j])
}

// dirByte returns the offset in data of the directory byte a lookup of
// group g reads first (to touch it before bounds).
func (s *hashSeq) dirByte(g uint32) uint32 {
	if s.wide {
		return s.dirOff + 4*g
	}
	return s.dirOff + g/hashSeqBlock*64 + 4 + g%hashSeqBlock
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
	lo, hi := s.bounds(uint32(s.group(v)))
	a, b := s.scan(v, uint64(lo), uint64(hi))
	return int(a), int(b)
}

// each calls fn for every element in order.
func (s *hashSeq) each(fn func(i int, v uint32)) {
	for g := uint32(0); g < 1<<s.dbits; g++ {
		lo, hi := s.bounds(g)
		for i := uint64(lo); i < uint64(hi); i++ {
			fn(int(i), uint32(uint64(g)<<s.rbits|s.remAt(i)))
		}
	}
}

// bytes is the memory the sequence holds.
func (s *hashSeq) bytes() uint64 { return uint64(len(s.data)) }
