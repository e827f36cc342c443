package statesvc

import "math/bits"

// efSeq is a static, sorted sequence of 32-bit values in Elias-Fano coding:
// each value is split into a high part (the top 32-lbits bits) and a low
// part (lbits bits). Low parts are packed in lbits bits each; high parts are
// stored in unary in the bit vector high — for every high value h in order,
// one 1 bit per element with that high part, then a 0 — so element i sits at
// bit h_i + i. With lbits = floor(log2(2^32/n)) that costs lbits + about 2
// bits per element: 32 - log2(n) + 2 bits, far below 32 for large n.
//
// zs samples the start of every efSampleEvery-th high value so a search
// skips at most efSampleEvery-1 zeros (a few words) instead of scanning from
// the beginning. Duplicates are allowed and stay adjacent.
type efSeq struct {
	n     int
	lbits uint
	low   []uint64
	high  []uint64
	zs    []uint32
}

const (
	efSampleShift = 6
	efSampleEvery = 1 << efSampleShift
)

// newEFSeq codes vals, which must be sorted ascending.
func newEFSeq(vals []uint32) efSeq {
	n := len(vals)
	if n == 0 {
		return efSeq{}
	}
	var l uint
	for l < 32 && uint64(n)<<(l+1) <= 1<<32 {
		l++
	}
	nHigh := uint64(1) << (32 - l) // distinct high values
	s := efSeq{
		n:     n,
		lbits: l,
		low:   make([]uint64, (uint64(n)*uint64(l)+63)/64+1),
		high:  make([]uint64, (uint64(n)+nHigh+63)/64+1),
		zs:    make([]uint32, nHigh>>efSampleShift+1),
	}
	mask := uint64(1)<<l - 1
	next := uint64(0) // next high value whose start is not yet sampled
	for i, v := range vals {
		h := uint64(v) >> l
		for ; next <= h; next += efSampleEvery {
			s.zs[next>>efSampleShift] = uint32(next + uint64(i))
		}
		pos := h + uint64(i)
		s.high[pos>>6] |= 1 << (pos & 63)
		if l > 0 {
			s.setLow(i, uint64(v)&mask)
		}
	}
	for ; next < nHigh; next += efSampleEvery {
		s.zs[next>>efSampleShift] = uint32(next + uint64(n))
	}
	return s
}

func (s *efSeq) setLow(i int, v uint64) {
	off := uint64(i) * uint64(s.lbits)
	w, sh := off>>6, off&63
	s.low[w] |= v << sh
	if sh+uint64(s.lbits) > 64 {
		s.low[w+1] |= v >> (64 - sh)
	}
}

func (s *efSeq) lowAt(i int) uint64 {
	if s.lbits == 0 {
		return 0
	}
	off := uint64(i) * uint64(s.lbits)
	w, sh := off>>6, off&63
	v := s.low[w] >> sh
	if sh+uint64(s.lbits) > 64 {
		v |= s.low[w+1] << (64 - sh)
	}
	return v & (1<<s.lbits - 1)
}

// each calls fn for every element in order.
func (s *efSeq) each(fn func(i int, v uint32)) {
	i := 0
	var h uint64
	for w, word := range s.high {
		for word != 0 {
			if i >= s.n {
				return
			}
			t := uint64(bits.TrailingZeros64(word))
			pos := uint64(w)<<6 + t
			h = pos - uint64(i)
			fn(i, uint32(h<<s.lbits|s.lowAt(i)))
			word &= word - 1
			i++
		}
	}
}

// start returns the bit position in high where the elements with high
// part h begin (the position right after the h-th zero).
func (s *efSeq) start(h uint64) uint64 {
	pos := uint64(s.zs[h>>efSampleShift])
	skip := h & (efSampleEvery - 1)
	if skip == 0 {
		return pos
	}
	w := pos >> 6
	word := ^s.high[w] & (^uint64(0) << (pos & 63))
	for {
		c := uint64(bits.OnesCount64(word))
		if c >= skip {
			break
		}
		skip -= c
		w++
		word = ^s.high[w]
	}
	return w<<6 + selectBit(word, skip-1) + 1
}

// selectBit returns the position of the k-th (from 0) set bit of word,
// which must have more than k set bits.
func selectBit(word, k uint64) uint64 {
	var pos uint64
	for {
		c := uint64(bits.OnesCount8(uint8(word)))
		if c > k {
			break
		}
		k -= c
		word >>= 8
		pos += 8
	}
	for ; k > 0; k-- {
		word &= word - 1
	}
	return pos + uint64(bits.TrailingZeros64(word))
}

// find returns the index of the first element equal to v and its bit
// position in high, or -1.
func (s *efSeq) find(v uint32) (int, uint64) {
	if s.n == 0 {
		return -1, 0
	}
	return s.findFrom(v, s.start(uint64(v)>>s.lbits))
}

// findFrom is find with the start of v's high part already known.
func (s *efSeq) findFrom(v uint32, pos uint64) (int, uint64) {
	h := uint64(v) >> s.lbits
	lv := uint64(v) & (1<<s.lbits - 1)
	for i := int(pos - h); s.high[pos>>6]&(1<<(pos&63)) != 0; i, pos = i+1, pos+1 {
		switch l := s.lowAt(i); {
		case l == lv:
			return i, pos
		case l > lv:
			return -1, 0
		}
	}
	return -1, 0
}

// nextEqual returns the element after i (at bit pos) if it also equals v,
// or -1.
func (s *efSeq) nextEqual(i int, pos uint64, v uint32) (int, uint64) {
	i, pos = i+1, pos+1
	if i < s.n && s.high[pos>>6]&(1<<(pos&63)) != 0 && s.lowAt(i) == uint64(v)&(1<<s.lbits-1) {
		return i, pos
	}
	return -1, 0
}

// bytes is the memory the sequence holds.
func (s *efSeq) bytes() uint64 {
	return uint64(8*cap(s.low) + 8*cap(s.high) + 4*cap(s.zs))
}
