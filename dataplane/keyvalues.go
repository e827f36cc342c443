package dataplane

import (
	"encoding/binary"
	"sync"
)

// KindCollectSink keeps the latest (largest) counter value per key, so a
// test can compare a keyed aggregate with an oracle after reconfigurations.
const KindCollectSink = "collect-sink"

// keyValues is the collecting sink's table: key → largest value seen,
// where values are little-endian uint64 counters.
// Values are held by pointer so that updating a known key is a lookup
// (m[string(b)] does not allocate) instead of an assignment, which copies
// the key into a new string for every record.
type keyValues struct {
	mu sync.Mutex
	m  map[string]*uint64
}

func newKeyValues() *keyValues { return &keyValues{m: map[string]*uint64{}} }

func (kv *keyValues) observe(recs []Record) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i := range recs {
		if len(recs[i].Value) < 8 {
			continue
		}
		v := binary.LittleEndian.Uint64(recs[i].Value)
		if p := kv.m[string(recs[i].Key)]; p != nil {
			*p = max(*p, v)
			continue
		}
		p := new(uint64)
		*p = v
		kv.m[string(recs[i].Key)] = p
	}
}

func (kv *keyValues) snapshot() map[string]uint64 {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	out := make(map[string]uint64, len(kv.m))
	for k, p := range kv.m {
		out[k] = *p
	}
	return out
}

// replace sets the table to m (a checkpoint's values).
func (kv *keyValues) replace(m map[string]uint64) {
	next := make(map[string]*uint64, len(m))
	for k, v := range m {
		p := new(uint64)
		*p = v
		next[k] = p
	}
	kv.mu.Lock()
	kv.m = next
	kv.mu.Unlock()
}

func init() {
	MustRegisterOperator(KindCollectSink, func(OperatorContext) (Operator, error) {
		return OperatorFunc(func([]Record, Emit) error { return nil }), nil
	})
}
