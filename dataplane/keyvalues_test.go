package dataplane

import (
	"encoding/binary"
	"maps"
	"testing"
)

// The collecting sink keeps the largest value per key and skips values
// shorter than 8 bytes.
func TestKeyValuesKeepsLargestPerKey(t *testing.T) {
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	kv := newKeyValues()
	key := []byte("a")
	kv.observe([]Record{{Key: key, Value: le(3)}, {Key: []byte("b"), Value: le(7)}, {Key: []byte("a"), Value: le(9)}})
	key[0] = 'z' // the sink must not alias record keys
	kv.observe([]Record{{Key: []byte("a"), Value: le(4)}, {Key: []byte("b"), Value: []byte{1, 2}}, {Key: []byte("c"), Value: le(0)}})
	snap := kv.snapshot()
	if want := map[string]uint64{"a": 9, "b": 7, "c": 0}; !maps.Equal(snap, want) {
		t.Fatalf("snapshot %v, want %v", snap, want)
	}
	snap["a"] = 100 // a snapshot is a copy
	if got := kv.snapshot()["a"]; got != 9 {
		t.Fatalf("changing a snapshot changed the sink: a = %d", got)
	}
}
