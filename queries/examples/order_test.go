package examples_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/produce"
	"koala/workflows"
	"koala/workflows/wftest"
)

// checkSequence keeps, per key, the last sequence number the operator saw
// (value state "last", stored as seq+1 so that 0 means none) next to a
// 16 KB pad (value state "pad") and emits the
// record with value (last seen + 1, this seq), 16 bytes little-endian. It
// never rejects a record: the test judges the order from the output.
func checkSequence(r dataplane.Record, st *dataplane.State, emit dataplane.Emit) error {
	if len(r.Value) != 8 {
		return fmt.Errorf("record %q: value has %d bytes, want an 8-byte sequence number", r.Key, len(r.Value))
	}
	seq := binary.LittleEndian.Uint64(r.Value)
	var last uint64
	if v := st.Get("last", r.Key); len(v) == 8 {
		last = binary.LittleEndian.Uint64(v)
	}
	st.Put("last", r.Key, binary.LittleEndian.AppendUint64(nil, seq+1))
	// A large entry per key makes each record cost a state write of real
	// size, so old owners fall behind their input while the rescale runs.
	st.Put("pad", r.Key, sequencePad)
	r.Value = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, last), seq)
	emit(r)
	return nil
}

var sequencePad = make([]byte, 16<<10)

var sequenceQuery = dataplane.NewQuery("example-sequence-order").
	Describe("sources -> keyed sequence check (value state) -> record sink").
	Source("source", 2).
	KeyedStateful("order", []string{"last", "pad"}, checkSequence).Parallelism(2).
	RecordSink("sink")

// sequencedInput is n records over numKeys keys; each key's records carry
// its own sequence numbers 0, 1, 2, … in production order. Kafka places a
// key in one partition, so one source task produces all records of a key
// and per key is per producer.
func sequencedInput(n, numKeys int) []dataplane.Record {
	next := map[string]uint64{}
	out := make([]dataplane.Record, n)
	for i := range out {
		k := produce.KeyName(produce.UniformKeyIndex(7, numKeys, int64(i)))
		out[i] = dataplane.Record{Key: []byte(k), Value: binary.LittleEndian.AppendUint64(nil, next[k]), EventTime: base + int64(i)*int64(time.Millisecond)}
		next[k]++
	}
	return out
}

// TestPerKeyOrderAcrossLazyRescale rescales a keyed operator lazily 2→4
// while records flow and checks that every key's records reach it in
// production order: the sequence numbers seen per key strictly increase,
// and each appears exactly once.
func TestPerKeyOrderAcrossLazyRescale(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	registerForTest(t, sequenceQuery)
	const numKeys = 200
	in := sequencedInput(90000, numKeys)
	third := len(in) / 3
	res := wftest.RunQuery(t, wftest.Options{
		Query: sequenceQuery.Name(), Backend: "pebble", Workers: 3, Timeout: 4 * time.Minute,
		Phases: []wftest.Phase{{Records: in[:third], Then: func(r *wftest.Run) {
			wait := r.ProduceAsync(in[third:2*third], 1000, time.Millisecond)
			r.Rescale(workflows.ReconfigureLazy, "order", 4)
			wait()
			if n := len(r.Dep.TasksOf("order")); n != 4 {
				t.Fatalf("order has %d tasks after the rescale, want 4", n)
			}
		}}, {Records: in[2*third:]}},
	})
	want := map[string]uint64{}
	for _, r := range in {
		want[string(r.Key)]++
	}
	seen := map[string]map[uint64]bool{}
	inversions := 0
	for _, r := range res.Output {
		if len(r.Value) != 16 {
			t.Fatalf("output %q: value has %d bytes, want 16", r.Key, len(r.Value))
		}
		k := string(r.Key)
		last, seq := binary.LittleEndian.Uint64(r.Value[:8]), binary.LittleEndian.Uint64(r.Value[8:])
		if seen[k] == nil {
			seen[k] = map[uint64]bool{}
		}
		if seen[k][seq] {
			t.Fatalf("key %s: sequence number %d processed twice", k, seq)
		}
		seen[k][seq] = true
		// last is the previous sequence number + 1 (0: none yet); strictly
		// increasing means it equals seq, since the input has no gaps.
		if last != seq {
			if inversions < 10 {
				t.Errorf("key %s: sequence number %d processed after %d (want right after %d)", k, seq, int64(last)-1, int64(seq)-1)
			}
			inversions++
		}
	}
	for k, n := range want {
		if uint64(len(seen[k])) != n {
			t.Fatalf("key %s: %d distinct sequence numbers processed, want %d", k, len(seen[k]), n)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("output has %d keys, want %d", len(seen), len(want))
	}
	if inversions > 0 {
		t.Fatalf("%d records were processed out of their key's production order", inversions)
	}
}
