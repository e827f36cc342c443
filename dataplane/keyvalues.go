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
}

// slot returns k's slot, claiming a free one (value 0) when k is new.
func (t *shortTable) slot(k *shortKey) *uint64 {
	if len(t.slots) == 0 {
		t.slots = make([]shortSlot, 1024)
	}
	mask := uint64(len(t.slots) - 1)
	for i := xxhash.Sum64(k[:]) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.k == *k {
			return &s.v
		}
		if s.k[shortKeyMax] == 0 {
			s.k = *k
			if t.n++; 4*t.n > 3*len(t.slots) {
				t.grow()
				return t.slot(k)
			}
			return &s.v
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

func (kv *keyValues) observe(recs []Record) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i := range recs {
		if len(recs[i].Value) < 8 {
			continue
		}
		v := binary.LittleEndian.Uint64(recs[i].Value)
		key := recs[i].Key
		if len(key) <= shortKeyMax {
			k := makeShortKey(key)
			p := kv.short.slot(&k)
			*p = max(*p, v) // a new key's slot holds 0
			continue
		}
		if p := kv.long[string(key)]; p != nil {
			*p = max(*p, v)
			continue
		}
		p := new(uint64)
		*p = v
		kv.long[string(key)] = p
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
			*next.short.slot(&sk) = v
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
