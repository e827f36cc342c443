package statesvc

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// keyFilter is a Bloom filter of every key a store wrote to Pebble since
// it was opened empty, so that a read of a key never written skips Pebble.
// After profiling the keyed counter over 10 M keys (most of them read for
// the first time, so absent), seeks through the memtable skiplists for
// keys that were not there were about half of its CPU: Pebble's sstables
// have Bloom filters, its memtables do not (RocksDB's can, for this reason).
//
// It grows in layers, each twice the keys of the one before, and a key
// may be present when any layer says so; past keyFilterMaxBits it stops
// answering (every key may be present), as does the filter of a store
// opened on existing data (a checkpoint or a snapshot), whose keys it never
// saw. Deleted keys stay in it: they cost a Pebble read, as before.
//
// Writers add keys before the write that makes them readable (under the
// store's wmu); readers test without a lock, bits are set atomically. A
// reader that tests before the bits are set reads "absent", which is what
// it would have read from Pebble an instant earlier.
type keyFilter struct {
	seed   maphash.Seed
	mu     sync.Mutex // adding a layer
	layers atomic.Pointer[[]*filterLayer]
	off    atomic.Bool
}

// filterLayer is a blocked Bloom filter: a key sets keyFilterProbes bits in
// one 512-bit block (one cache line) chosen by its hash.
type filterLayer struct {
	blocks []uint64 // 8 words per block
	keys   atomic.Int64
	max    int64 // keys it takes at its bits per key
}

const (
	keyFilterBitsPerKey = 10
	keyFilterProbes     = 6
	keyFilterFirstKeys  = 1 << 20
	// keyFilterMaxBits bounds the filter's memory (64 MiB).
	keyFilterMaxBits = 512 << 20
)

func newKeyFilter() *keyFilter {
	f := &keyFilter{seed: maphash.MakeSeed()}
	layers := []*filterLayer{newFilterLayer(keyFilterFirstKeys)}
	f.layers.Store(&layers)
	return f
}

func newFilterLayer(keys int64) *filterLayer {
	blocks := (keys*keyFilterBitsPerKey + 511) / 512
	return &filterLayer{blocks: make([]uint64, blocks*8), max: keys}
}

// probes returns the block of a layer with nblocks blocks and the bit
// positions of hash h in it.
func probes(h uint64, nblocks int) (block int, bits [keyFilterProbes]uint16) {
	block = int((h >> 32) * uint64(nblocks) >> 32)
	h1, h2 := uint32(h), uint32(h>>32)|1
	for i := range bits {
		bits[i] = uint16((h1 + uint32(i)*h2) & 511)
	}
	return block, bits
}

func (l *filterLayer) add(h uint64) {
	b, bits := probes(h, len(l.blocks)/8)
	w := l.blocks[b*8 : b*8+8]
	for _, bit := range bits {
		atomic.OrUint64(&w[bit>>6], 1<<(bit&63))
	}
	l.keys.Add(1)
}

func (l *filterLayer) mayContain(h uint64) bool {
	b, bits := probes(h, len(l.blocks)/8)
	w := l.blocks[b*8 : b*8+8]
	for _, bit := range bits {
		if atomic.LoadUint64(&w[bit>>6])&(1<<(bit&63)) == 0 {
			return false
		}
	}
	return true
}

// add records that k is about to be written. The caller holds the store's
// wmu (one writer at a time).
func (f *keyFilter) add(k []byte) {
	if !f.off.Load() {
		f.addHash(maphash.Bytes(f.seed, k))
	}
}

// addString is add for a key held as a string (a cache entry's); maphash
// hashes a string as its bytes.
func (f *keyFilter) addString(k string) {
	if !f.off.Load() {
		f.addHash(maphash.String(f.seed, k))
	}
}

func (f *keyFilter) addHash(h uint64) {
	layers := *f.layers.Load()
	top := layers[len(layers)-1]
	if top.keys.Load() >= top.max {
		bits := int64(0)
		for _, l := range layers {
			bits += int64(len(l.blocks)) * 64
		}
		next := 2 * top.max
		if bits+next*keyFilterBitsPerKey > keyFilterMaxBits {
			f.off.Store(true)
			return
		}
		f.mu.Lock()
		grown := append(append([]*filterLayer(nil), layers...), newFilterLayer(next))
		f.layers.Store(&grown)
		f.mu.Unlock()
		top = grown[len(grown)-1]
	}
	top.add(h)
}

// mayContain is false only for a key never added (while the filter is on).
func (f *keyFilter) mayContain(k []byte) bool {
	if f.off.Load() {
		return true
	}
	h := maphash.Bytes(f.seed, k)
	for _, l := range *f.layers.Load() {
		if l.mayContain(h) {
			return true
		}
	}
	return false
}
