package dataplane

import (
	"encoding/binary"
	"koala/dataplane/control"
	"sync"
)

// keyValues is the collecting sink's table: key → largest value seen,
// where values are little-endian uint64 counters.
//
// Keys up to shortKeyMax bytes (the generators' keys are 8) live in a map
// keyed by a fixed-size array holding the bytes and the length, whose
// values index a dense slice of counters: one map access per record, and
// the key comparison stays within the map's own slots. With a
// string-keyed map, profiling of the steady keyed counter showed the key
// comparisons (loading each key's bytes from elsewhere in memory) and the
// probe as the sink's main cost. Longer keys go to a string-keyed map.
// Both are exact: keys are compared in full, never by hash alone.
type keyValues struct {
	mu    sync.Mutex
	short map[shortKey]int32 // index into vals
	vals  []uint64
	long  map[string]*uint64 // by pointer: updating a known key is a lookup
}

// shortKeyMax is the longest key held in a shortKey.
const shortKeyMax = 15

// shortKey is a key of at most shortKeyMax bytes, zero-padded, with its
// length in the last byte (so "a" and "a\x00" differ).
type shortKey [shortKeyMax + 1]byte

func makeShortKey(b []byte) shortKey {
	var k shortKey
	copy(k[:], b)
	k[shortKeyMax] = byte(len(b))
	return k
}

func (k *shortKey) String() string { return string(k[:k[shortKeyMax]]) }

func newKeyValues() *keyValues {
	return &keyValues{short: map[shortKey]int32{}, long: map[string]*uint64{}}
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
			if i, ok := kv.short[k]; ok {
				kv.vals[i] = max(kv.vals[i], v)
			} else {
				kv.short[k] = int32(len(kv.vals))
				kv.vals = append(kv.vals, v)
			}
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
	out := make(map[string]uint64, len(kv.short)+len(kv.long))
	for k, i := range kv.short {
		out[k.String()] = kv.vals[i]
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
			next.short[makeShortKey([]byte(k))] = int32(len(next.vals))
			next.vals = append(next.vals, v)
			continue
		}
		p := new(uint64)
		*p = v
		next.long[k] = p
	}
	kv.mu.Lock()
	kv.short, kv.vals, kv.long = next.short, next.vals, next.long
	kv.mu.Unlock()
}

func init() {
	MustRegisterOperator(control.KindCollectSink, func(OperatorContext) (Operator, error) {
		return OperatorFunc(func([]Record, Emit) error { return nil }), nil
	})
}
