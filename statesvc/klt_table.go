package statesvc

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// kltTable is the unsynchronized storage behind KLT: an append-only arena of
// entries plus an open-addressing hash index of 8-byte slots.
//
// Arena entry: uvarint(len(key)<<1 | dead) | key | bucket (2 bytes BE) |
// uvarint(owner index). Setting the dead bit never changes the header's
// length. Entries live in chunks of up to kltChunk bytes and never span
// chunks (an entry longer than a chunk gets a chunk of its own), so the arena
// grows without copying and a location is chunk<<20 | offset.
//
// Index: Robin Hood linear probing. Slot 0 = empty, otherwise
// tag<<48 | displacement<<40 | location: tag holds 15 hash bits with bit 15
// set (so a used slot is never 0) and rejects almost all mismatches without
// touching the arena; displacement is the distance from the key's home slot,
// which lets lookups stop early (a miss ends at the first slot whose entry is
// closer to its home than the probe is), lets inserts displace entries
// without rehashing them, and lets removals shift back instead of leaving
// tombstones. The home slot comes from the hash's high bits (fastrange), so
// the index can have any size: it grows to a load of kltGrowLoad when it
// passes kltMaxLoad, about 8/0.7 bytes per key on average.
type kltTable struct {
	chunks    [][]byte
	slots     []uint64
	live      int // live entries (= used slots)
	liveBytes int // arena bytes of live entries
	deadBytes int // arena bytes of dead entries
	takeHint  uint64
	// saturated is set when some displacement did not fit in 8 bits: lookups
	// then probe to an empty slot, and the next insert rehashes.
	saturated bool
}

const (
	kltChunkBits = 20
	kltChunk     = 1 << kltChunkBits
	kltMaxChunks = 1 << 20
	kltLocMask   = 1<<40 - 1
	kltDispShift = 40
	kltDispMax   = 255
	kltDispOne   = 1 << kltDispShift
	kltTagMask   = ^uint64(1<<48 - 1)
	kltMaxLoad   = 0.875
	kltGrowLoad  = 0.55
	kltMinSlots  = 16
)

func kltHash(key []byte) uint64 { return xxhash.Sum64(key) }

func kltTag(h uint64) uint64 { return (h&0x7fff | 0x8000) << 48 }

func kltDisp(s uint64) int { return int(s>>kltDispShift) & kltDispMax }

func (t *kltTable) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.slots)))
	return int(hi)
}

// entryAt decodes the entry at loc.
func (t *kltTable) entryAt(loc uint64) (key []byte, bucket int, owner uint32, dead bool, size int) {
	c := t.chunks[loc>>kltChunkBits][loc&(kltChunk-1):]
	hdr, n := binary.Uvarint(c)
	klen := int(hdr >> 1)
	key = c[n : n+klen]
	p := n + klen
	bucket = int(binary.BigEndian.Uint16(c[p:]))
	o, m := binary.Uvarint(c[p+2:])
	return key, bucket, uint32(o), hdr&1 == 1, p + 2 + m
}

// keyAt returns only the key at loc (the lookup fast path).
func (t *kltTable) keyAt(loc uint64) []byte {
	c := t.chunks[loc>>kltChunkBits][loc&(kltChunk-1):]
	if c[0] < 0x80 { // one-byte header: keys shorter than 64 bytes
		return c[1 : 1+int(c[0]>>1)]
	}
	hdr, n := binary.Uvarint(c)
	return c[n : n+int(hdr>>1)]
}

func (t *kltTable) markDead(loc uint64) {
	c := t.chunks[loc>>kltChunkBits][loc&(kltChunk-1):]
	c[0] |= 1
}

// find returns the slot index holding key, or -1.
func (t *kltTable) find(key []byte, h uint64) int {
	n := len(t.slots)
	if n == 0 {
		return -1
	}
	tag := kltTag(h)
	for i, d := t.home(h), 0; ; d++ {
		s := t.slots[i]
		if s == 0 || (kltDisp(s) < d && !t.saturated) {
			return -1
		}
		if s&kltTagMask == tag && string(t.keyAt(s&kltLocMask)) == string(key) {
			return i
		}
		if i++; i == n {
			i = 0
		}
	}
}

// kltGroup is how many keys findBatch resolves together.
const kltGroup = 64

// findBatch stores in out[i] the slot index of keys[i], or -1, and returns a
// value to keep its touching loads alive. It works in passes over groups of
// keys so the cache misses of different keys overlap (memory-level
// parallelism) instead of queueing one behind the other: (1) hash; (2) touch
// each home slot's cache line and the next one in a tight loop; (3) probe by
// tag only, now in cache; (4) touch the candidates' arena entries in a tight
// loop; (5) compare keys, now in cache. On tables larger than the CPU caches this is several
// times faster than one find per key.
func (t *kltTable) findBatch(keys [][]byte, out []int) uint64 {
	if len(t.slots) == 0 {
		for i := range out {
			out[i] = -1
		}
		return 0
	}
	var hs [kltGroup]uint64
	var cand [kltGroup]int
	var sink uint64
	n, last := len(t.slots), len(t.slots)-1
	for base := 0; base < len(keys); base += kltGroup {
		g := keys[base:min(base+kltGroup, len(keys))]
		for i, k := range g {
			h := kltHash(k)
			hs[i], cand[i] = h, t.home(h)
		}
		for _, h := range cand[:len(g)] {
			sink += t.slots[h] + t.slots[min(h+8, last)]
		}
		for i := range g {
			tag, j := kltTag(hs[i]), cand[i]
			cand[i] = -1
			for d := 0; ; d++ {
				s := t.slots[j]
				if s == 0 || (kltDisp(s) < d && !t.saturated) {
					break
				}
				if s&kltTagMask == tag {
					cand[i] = j
					break
				}
				if j++; j == n {
					j = 0
				}
			}
		}
		for _, j := range cand[:len(g)] {
			if j >= 0 {
				loc := t.slots[j] & kltLocMask
				sink += uint64(t.chunks[loc>>kltChunkBits][loc&(kltChunk-1)])
			}
		}
		for i, k := range g {
			j := cand[i]
			switch {
			case j < 0:
			case string(t.keyAt(t.slots[j]&kltLocMask)) == string(k):
			default: // tag collision (about 2^-15 per probe): full probe
				j = t.find(k, hs[i])
			}
			out[base+i] = j
		}
	}
	return sink
}

// appendEntry writes an entry to the arena and returns its location.
func (t *kltTable) appendEntry(key []byte, bucket int, owner uint32) uint64 {
	var hdr [binary.MaxVarintLen64]byte
	hn := binary.PutUvarint(hdr[:], uint64(len(key))<<1)
	var own [binary.MaxVarintLen32]byte
	on := binary.PutUvarint(own[:], uint64(owner))
	size := hn + len(key) + 2 + on
	ci := len(t.chunks) - 1
	if ci < 0 || len(t.chunks[ci])+size > kltChunk {
		ci++
		if ci >= kltMaxChunks {
			panic("statesvc: key lookup table arena exhausted (1 TiB)")
		}
		t.chunks = append(t.chunks, make([]byte, 0, min(max(size, 4096), kltChunk)))
	}
	c := t.chunks[ci]
	if len(c)+size > cap(c) { // grow this chunk (locations are offsets, so moving is fine)
		nc := make([]byte, len(c), max(min(2*cap(c), kltChunk), len(c)+size))
		copy(nc, c)
		c = nc
	}
	off := len(c)
	c = append(c, hdr[:hn]...)
	c = append(c, key...)
	c = binary.BigEndian.AppendUint16(c, uint16(bucket))
	c = append(c, own[:on]...)
	t.chunks[ci] = c
	t.liveBytes += size
	return uint64(ci)<<kltChunkBits | uint64(off)
}

// insertSlot places tag|loc for hash h (the key must not be present),
// Robin Hood style: the entry takes the slot of any entry closer to its home.
func (t *kltTable) insertSlot(h, loc uint64) {
	n := len(t.slots)
	e, d := kltTag(h)|loc, 0
	for i := t.home(h); ; {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = e | uint64(min(d, kltDispMax))<<kltDispShift
			return
		}
		if sd := kltDisp(s); sd < d {
			t.slots[i] = e | uint64(min(d, kltDispMax))<<kltDispShift
			e, d = s&^(kltDispMax<<kltDispShift), sd
		}
		if d++; d >= kltDispMax {
			t.saturated = true
		}
		if i++; i == n {
			i = 0
		}
	}
}

// reserve makes room for one more entry, growing the index when it would
// pass kltMaxLoad (or has saturated displacements).
func (t *kltTable) reserve() {
	if !t.saturated && float64(t.live+1) <= kltMaxLoad*float64(len(t.slots)) {
		return
	}
	t.rehash(max(kltMinSlots, int(float64(t.live+1)/kltGrowLoad)))
}

func (t *kltTable) rehash(n int) {
	old := t.slots
	t.slots = make([]uint64, n)
	t.saturated = false
	for _, s := range old {
		if s != 0 {
			loc := s & kltLocMask
			t.insertSlot(kltHash(t.keyAt(loc)), loc)
		}
	}
}

// put adds or updates key. It returns true if the key was new.
func (t *kltTable) put(key []byte, bucket int, owner uint32) bool {
	h := kltHash(key)
	if i := t.find(key, h); i >= 0 {
		loc := t.slots[i] & kltLocMask
		_, b, o, _, size := t.entryAt(loc)
		if b == bucket && o == owner {
			return false
		}
		t.kill(loc, size)
		t.slots[i] = t.slots[i]&^kltLocMask | t.appendEntry(key, bucket, owner)
		return false
	}
	t.reserve()
	t.insertSlot(h, t.appendEntry(key, bucket, owner))
	t.live++
	return true
}

func (t *kltTable) kill(loc uint64, size int) {
	t.markDead(loc)
	t.liveBytes -= size
	t.deadBytes += size
}

// removeAt kills the entry in slot i.
func (t *kltTable) removeAt(i int) {
	loc := t.slots[i] & kltLocMask
	_, _, _, _, size := t.entryAt(loc)
	t.kill(loc, size)
	t.live--
	// Backward shift: pull the following displaced entries one slot closer
	// to home, so no tombstones are needed.
	n := len(t.slots)
	for {
		j := i + 1
		if j == n {
			j = 0
		}
		s := t.slots[j]
		if s == 0 || kltDisp(s) == 0 {
			t.slots[i] = 0
			return
		}
		t.slots[i] = s - kltDispOne
		i = j
	}
}

// maybeShrink frees everything when empty and compacts the arena when dead
// entries outweigh live ones (amortized O(1) per removal).
func (t *kltTable) maybeShrink() {
	switch {
	case t.live == 0:
		*t = kltTable{}
	case t.deadBytes > t.liveBytes && t.deadBytes > kltChunk:
		t.compact()
	}
}

// compact copies the live entries (in arena order) into a fresh arena and
// index sized for them.
func (t *kltTable) compact() {
	old := *t
	*t = kltTable{slots: make([]uint64, max(kltMinSlots, int(float64(old.live)/kltGrowLoad)))}
	old.walk(0, func(loc uint64, key []byte, bucket int, owner uint32) bool {
		t.insertSlot(kltHash(key), t.appendEntry(key, bucket, owner))
		t.live++
		return true
	})
}

// walk calls fn for live entries in arena order, starting at location from.
func (t *kltTable) walk(from uint64, fn func(loc uint64, key []byte, bucket int, owner uint32) bool) {
	for ci := int(from >> kltChunkBits); ci < len(t.chunks); ci++ {
		off := 0
		if ci == int(from>>kltChunkBits) {
			off = int(from & (kltChunk - 1))
		}
		for off < len(t.chunks[ci]) {
			loc := uint64(ci)<<kltChunkBits | uint64(off)
			key, bucket, owner, dead, size := t.entryAt(loc)
			off += size
			if !dead && !fn(loc, key, bucket, owner) {
				return
			}
		}
	}
}

// bytes is the approximate memory footprint of the table.
func (t *kltTable) bytes() uint64 {
	n := uint64(8*cap(t.slots) + 24*cap(t.chunks))
	for _, c := range t.chunks {
		n += uint64(cap(c))
	}
	return n
}
