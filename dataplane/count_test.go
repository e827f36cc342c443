package dataplane

import "encoding/binary"

// countPerKey is the keyed counter the runtime's tests and benchmarks run:
// state "count" holds each key's count as 8 little-endian bytes, and every
// record is emitted with the count so far as its value.
func countPerKey(r Record, st *State, emit Emit) error {
	var n uint64
	if v := st.Get("count", r.Key); len(v) == 8 {
		n = binary.LittleEndian.Uint64(v)
	}
	r.Value = binary.LittleEndian.AppendUint64(nil, n+1)
	st.Put("count", r.Key, r.Value)
	emit(r)
	return nil
}
