package examples

import (
	"encoding/binary"

	"koala/dataplane"
)

// CountRecord adds r to its key's count (value state "count") and emits
// (key, count as 8 bytes little-endian), keeping r's identity.
func CountRecord(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	var n uint64
	if v := st.Get("count", r.Key); len(v) == 8 {
		n = binary.LittleEndian.Uint64(v)
	}
	r.Value = binary.LittleEndian.AppendUint64(nil, n+1)
	st.Put("count", r.Key, r.Value)
	emit(r)
	return nil
}

// Counter: the running count per key; the sink keeps the latest per key.
var Counter = dataplane.NewQuery("example-counter").
	Describe("source -> keyed counter (value state) -> collect sink").
	Source("source", 1).
	KeyedStateful("counter", []string{"count"}, CountRecord).Parallelism(2).
	CollectSink("sink")

func init() { register(Counter, "") }
