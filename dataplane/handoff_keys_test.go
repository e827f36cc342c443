package dataplane

import (
	"encoding/binary"
	"slices"
	"testing"

	"koala/dataplane/control"
	"koala/statesvc"
)

// noScanPebble is a task's Pebble store that fails the test on Scan: a
// scan writes every buffered write of the store back first, under its
// write lock, which a handoff must not cost the task.
type noScanPebble struct {
	*statesvc.Pebble
	t *testing.T
}

func (s noScanPebble) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	s.t.Errorf("the handoff scanned [%q, %q)", start, end)
	return s.Pebble.Scan(start, end, fn)
}

// TestLocalEntriesListKeysOnly: an old owner lists the keys of the buckets
// it hands over — two runs of buckets, keys in Pebble, keys only buffered,
// keys deleted with the delete still buffered, two states per key — each
// key once (as its lookup table hash, sorted per bucket), nothing of
// other buckets, and without a scan. From its key index it hands over
// the same, plus the deleted keys (the index may hold gone keys), and
// the index forgets the buckets.
func TestLocalEntriesListKeysOnly(t *testing.T) {
	for _, fromIndex := range []bool{false, true} {
		t.Run(map[bool]string{false: "listed", true: "indexed"}[fromIndex], func(t *testing.T) {
			testLocalEntries(t, fromIndex)
		})
	}
}

func testLocalEntries(t *testing.T, fromIndex bool) {
	c := newKLTCkptCluster(t, t.TempDir())
	ks := c.tasks["count-0"].keyed
	p, ok := ks.store.(*statesvc.Pebble)
	if !ok {
		t.Fatalf("count-0's store is a %T, want *statesvc.Pebble", ks.store)
	}
	ks.names = []string{"count", "extra"}
	ks.localIdx = newLocalIndex(kltCkptBuckets)
	put := func(from, to int, del bool) {
		var kvs []statesvc.KV
		for i := from; i < to; i++ {
			k := []byte(keyName(i))
			for si, n := range ks.names {
				if si == 1 && i%3 != 0 {
					continue // a second state for a third of the keys
				}
				kv := statesvc.KV{Key: ks.stateKey(n, k)}
				if !del {
					kv.Value = binary.LittleEndian.AppendUint64(nil, uint64(i))
				}
				kvs = append(kvs, kv)
			}
		}
		ks.localIdx.addKVs(kvs) // as the task's writes do
		if err := p.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
	}
	put(0, 3000, false)
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	put(2000, 4000, false) // buffered, partly over values in Pebble
	put(1500, 2500, true)  // buffered deletes, partly of values in Pebble
	ks.store = noScanPebble{Pebble: p, t: t}
	handed := []int{10, 1, 2, 3, 9}
	want := map[int][]uint32{}
	for i := range 4000 {
		k := []byte(keyName(i))
		if b, h := statesvc.KLTHash(k, kltCkptBuckets); (fromIndex || i < 1500 || i >= 2500) && slices.Contains(handed, b) {
			want[b] = append(want[b], h)
		}
	}
	me := control.TaskRef{ID: "count-0", WorkerID: "w1"}
	var local handoffKeys
	if fromIndex {
		local.hashes, local.ok = ks.localIdx.take(handed, true) // lazy: kept
		if !local.ok {
			t.Fatal("a fresh task's key index is incomplete")
		}
		again, _ := ks.localIdx.take(handed, false) // bulk: removed
		if !slices.EqualFunc(again, local.hashes, slices.Equal[[]uint32]) {
			t.Fatal("a lazy handoff's take did not keep the buckets' keys")
		}
		if again, _ := ks.localIdx.take(handed, false); slices.ContainsFunc(again, func(hs []uint32) bool { return len(hs) > 0 }) {
			t.Fatal("the index still has keys of the buckets a bulk handoff gave away")
		}
	}
	entries, err := ks.localEntries(handed, me, local)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int][]uint32{}
	for i, r := range entries {
		if r.Offset != kltHashesOffset || len(r.Key)%4 != 0 {
			t.Fatalf("entry %d: offset %d, %d key bytes; want a hashes record", i, r.Offset, len(r.Key))
		}
		if ref, err := decodeOwner(r.Value); err != nil || ref != me {
			t.Fatalf("entry %d names %+v (%v), want %+v", i, ref, err, me)
		}
		b := int(r.Partition)
		if i > 0 && int(entries[i-1].Partition) > b {
			t.Fatalf("entry %d of bucket %d after one of bucket %d: buckets out of order", i, b, entries[i-1].Partition)
		}
		for k := r.Key; len(k) > 0; k = k[4:] {
			got[b] = append(got[b], binary.LittleEndian.Uint32(k))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d buckets, want %d", len(got), len(want))
	}
	for b, w := range want {
		slices.Sort(w)
		if !slices.IsSorted(got[b]) {
			t.Fatalf("bucket %d: hashes not sorted", b)
		}
		if !slices.Equal(got[b], w) {
			t.Fatalf("bucket %d: listed %d hashes, want %d", b, len(got[b]), len(w))
		}
	}
}

func keyName(i int) string { return "k" + string(binary.BigEndian.AppendUint32(nil, uint32(i))) }
