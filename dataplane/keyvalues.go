package dataplane

import (
	"encoding/binary"
	"sync"

	"github.com/cespare/xxhash/v2"

	"koala/dataplane/control"
)

// keyValues is the collecting sink's table: key → largest value seen,
// where values are little-endian uint64 counters.
//
// Keys up to shortKeyMax bytes (the generators' keys are 8) live in one
// flat open-addressed table of (key, value) slots: a record costs one
// probe, usually one cache line, with the key compared in the slot
// itself. Profiles of the keyed counter showed this table as a large
// share of the sink's CPU, first with a string-keyed map (key comparisons
// loading each key's bytes from elsewhere) and then with a Go map of
// fixed-size keys (its directory, control words and slots each a cache
// miss over 10 M keys). Longer keys go to a string-keyed map. Both are
// exact: keys are compared in full, never by hash alone.
type keyValues struct {
	mu    sync.Mutex
	short shortTable
	long  map[string]*uint64 // by pointer: updating a known key is a lookup
}

// shortKeyMax is the longest key held in a shortKey.
const shortKeyMax = 15

// shortKey is a key of at most shortKeyMax bytes, zero-padded, with its
// length plus one in the last byte (so "a" and "a\x00" differ, and the
// zero shortKey, a free slot, is no key).
type shortKey [shortKeyMax + 1]byte

func makeShortKey(b []byte) shortKey {
	var k shortKey
	copy(k[:], b)
	k[shortKeyMax] = byte(len(b)) + 1
	return k
}

func (k *shortKey) String() string { return string(k[:k[shortKeyMax]-1]) }

// shortTable maps shortKeys to values: linear probing over a power-of-two
// array kept at most 3/4 full (see offsetTable).
type shortTable struct {
	slots []shortSlot
	n     int
}

type shortSlot struct {
	k shortKey
	v uint64
	// pos is the sink ledger's order check for this key (see orderPos):
	// the partition and highest offset of the key's records seen there,
	// kept beside the value so that a record costs one probe, not one here
	// and one in the ledger's own table; 0 while none was recorded.
	pos uint64
}

// Order positions: partition+1 in the top 16 bits, the offset below.
const (
	posOffsetBits = 48
	posOffsetMask = 1<<posOffsetBits - 1
)

// orderPos encodes (partition, offset) for shortSlot.pos; ok is false when
// they do not fit (the ledger then uses its own table).
func orderPos(partition int32, offset int64) (pos uint64, ok bool) {
	if partition < 0 || partition >= 1<<(64-posOffsetBits)-1 || offset < 0 || offset > posOffsetMask {
		return 0, false
	}
	return uint64(partition+1)<<posOffsetBits | uint64(offset), true
}

// slot returns k's slot, claiming a free one (value 0, no position) when k
// is new.
func (t *shortTable) slot(k *shortKey) *shortSlot {
	if len(t.slots) == 0 {
		t.slots = make([]shortSlot, 1024)
	}
	mask := uint64(len(t.slots) - 1)
	for i := xxhash.Sum64(k[:]) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.k == *k {
			return s
		}
		if s.k[shortKeyMax] == 0 {
			s.k = *k
			if t.n++; 4*t.n > 3*len(t.slots) {
				t.grow()
				return t.slot(k)
			}
			return s
		}
	}
}

func (t *shortTable) grow() {
	old := t.slots
	t.slots = make([]shortSlot, 2*len(old))
	mask := uint64(len(t.slots) - 1)
	for _, s := range old {
		if s.k[shortKeyMax] == 0 {
			continue
		}
		i := xxhash.Sum64(s.k[:]) & mask
		for t.slots[i].k[shortKeyMax] != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

func newKeyValues() *keyValues {
	return &keyValues{long: map[string]*uint64{}}
}

// observeLocked records r's value and returns its key's slot, or nil when
// r has no value or a long key. The caller (sinkLedger.observe, which
// checks order in the slot) holds kv.mu.
func (kv *keyValues) observeLocked(r *Record) *shortSlot {
	if len(r.Value) < 8 {
		return nil
	}
	v := binary.LittleEndian.Uint64(r.Value)
	if len(r.Key) <= shortKeyMax {
		k := makeShortKey(r.Key)
		s := kv.short.slot(&k)
		s.v = max(s.v, v) // a new key's slot holds 0
		return s
	}
	if p := kv.long[string(r.Key)]; p != nil {
		*p = max(*p, v)
		return nil
	}
	p := new(uint64)
	*p = v
	kv.long[string(r.Key)] = p
	return nil
}

// forgetOrder clears every slot's order position (sinkLedger.restartOrder).
func (kv *keyValues) forgetOrder() {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i := range kv.short.slots {
		kv.short.slots[i].pos = 0
	}
}

func (kv *keyValues) snapshot() map[string]uint64 {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	out := make(map[string]uint64, kv.short.n+len(kv.long))
	for i := range kv.short.slots {
		if s := &kv.short.slots[i]; s.k[shortKeyMax] != 0 {
			out[s.k.String()] = s.v
		}
	}
	for k, p := range kv.long {
		out[k] = *p
	}
	return out
}

// replace sets the table to m (a checkpoint's values).
func (kv *keyValues) replace(m map[string]uint64) {
	next := newKeyValues()
	for k, v := range m {
		if len(k) <= shortKeyMax {
			sk := makeShortKey([]byte(k))
			next.short.slot(&sk).v = v
			continue
		}
		p := new(uint64)
		*p = v
		next.long[k] = p
	}
	kv.mu.Lock()
	kv.short, kv.long = next.short, next.long
	kv.mu.Unlock()
}

func init() {
	MustRegisterOperator(control.KindCollectSink, func(OperatorContext) (Operator, error) {
		return OperatorFunc(func([]Record, Emit) error { return nil }), nil
	})
}
