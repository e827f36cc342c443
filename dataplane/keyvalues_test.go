package dataplane

import (
	"encoding/binary"
	"koala/dataplane/produce"
	"maps"
	"strings"
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

// Keys of every length class (empty, with trailing zero bytes, at the
// short/long boundary, long) are kept apart and survive replace.
func TestKeyValuesKeyLengths(t *testing.T) {
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	keys := []string{"", "\x00", "a", "a\x00", "a\x00\x00", strings.Repeat("x", shortKeyMax), strings.Repeat("x", shortKeyMax) + "\x00", strings.Repeat("x", shortKeyMax+1), strings.Repeat("y", 100)}
	want := map[string]uint64{}
	kv := newKeyValues()
	for round := uint64(1); round <= 3; round++ {
		var recs []Record
		for i, k := range keys {
			v := round*100 + uint64(i)
			recs = append(recs, Record{Key: []byte(k), Value: le(v)}, Record{Key: []byte(k), Value: le(v - 50)})
			want[k] = v
		}
		kv.observe(recs)
	}
	if snap := kv.snapshot(); !maps.Equal(snap, want) {
		t.Fatalf("snapshot %v, want %v", snap, want)
	}
	restored := newKeyValues()
	restored.replace(want)
	restored.observe([]Record{{Key: []byte("a"), Value: le(1)}, {Key: []byte(keys[len(keys)-1]), Value: le(1000)}})
	want[keys[len(keys)-1]] = 1000
	if snap := restored.snapshot(); !maps.Equal(snap, want) {
		t.Fatalf("after replace: snapshot %v, want %v", snap, want)
	}
}

// BenchmarkKeyValues: the collecting sink's per-record cost over the
// steady counter bench's 200 000 keys (experiments/bench/counter-steady.json).
func BenchmarkKeyValues(b *testing.B) {
	const nKeys, batch = 200_000, 1000
	keys := make([][]byte, nKeys)
	for i := range keys {
		keys[i] = []byte(produce.KeyName(i))
	}
	recs := make([]Record, batch)
	kv := newKeyValues()
	for i := range keys { // the steady state: every key known
		kv.observe([]Record{{Key: keys[i], Value: binary.LittleEndian.AppendUint64(nil, 0)}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for n := 0; n < b.N; n++ {
		for j := range recs {
			i := n*batch + j
			recs[j] = Record{Key: keys[uint32(i*2654435761)%nKeys], Value: binary.LittleEndian.AppendUint64(recs[j].Value[:0], uint64(i))}
		}
		kv.observe(recs)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*batch), "cpu-ns/record")
}

// observe records recs' values as a collecting sink's ledger does
// (sinkLedger.observe), without the ledger's own counting.
func (kv *keyValues) observe(recs []Record) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i := range recs {
		kv.observeLocked(&recs[i])
	}
}
