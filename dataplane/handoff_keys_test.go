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
// key once, nothing of other buckets, and without a scan.
func TestLocalEntriesListKeysOnly(t *testing.T) {
	c := newKLTCkptCluster(t, t.TempDir())
	ks := c.tasks["count-0"].keyed
	p, ok := ks.store.(*statesvc.Pebble)
	if !ok {
		t.Fatalf("count-0's store is a %T, want *statesvc.Pebble", ks.store)
	}
	ks.names = []string{"count", "extra"}
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
	handed := []int{1, 2, 3, 9, 10}
	var want []string
	for i := range 4000 {
		k := keyName(i)
		if (i < 1500 || i >= 2500) && slices.Contains(handed, statesvc.BucketOf([]byte(k), kltCkptBuckets)) {
			want = append(want, k)
		}
	}
	me := control.TaskRef{ID: "count-0", WorkerID: "w1"}
	entries, err := ks.localEntries(handed, me)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, r := range entries {
		got = append(got, string(r.Key))
		if named := len(r.Value) > 0; named != (i == 0) {
			t.Fatalf("entry %d names an owner: %v (only the first does)", i, named)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %d keys, want %d (first difference at %d)", len(got), len(want), firstDifference(got, want))
	}
	if ref, err := decodeOwner(entries[0].Value); err != nil || ref != me {
		t.Fatalf("first entry names %+v (%v), want %+v", ref, err, me)
	}
}

func keyName(i int) string { return "k" + string(binary.BigEndian.AppendUint32(nil, uint32(i))) }

func firstDifference(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
