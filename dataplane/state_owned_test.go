package dataplane

import (
	"testing"
)

// What the operator gave up (PutOwned) reaches the store marked as such;
// a later Put or Delete of the same slot, and a fetched value the operator
// did not write, are not marked.
func TestWritesMarkOwnedValues(t *testing.T) {
	ks := &keyedState{opName: "op", buckets: 8, names: []string{"a", "b"}}
	st := newState(ks.names, 4)
	st.PutOwned("a", []byte("k1"), []byte("given"))
	st.Put("b", []byte("k1"), []byte("lent"))
	st.PutOwned("a", []byte("k2"), []byte("given, then replaced"))
	st.Put("a", []byte("k2"), []byte("lent"))
	st.PutOwned("b", []byte("k2"), []byte("given, then deleted"))
	st.Delete("b", []byte("k2"))
	st.setFetched(string(rune(0))+"k3", []byte("fetched"))
	kvs := ks.writes(st, nil)
	if len(kvs) != len(ks.owned) {
		t.Fatalf("%d writes, %d ownership marks", len(kvs), len(ks.owned))
	}
	got := map[string]bool{}
	for i, kv := range kvs {
		got[string(kv.Value)] = ks.owned[i]
	}
	want := map[string]bool{"given": true, "lent": false, "": false, "fetched": false}
	if len(got) != len(want) {
		t.Fatalf("writes %v, want values %v", got, want)
	}
	for v, w := range want {
		if got[v] != w {
			t.Errorf("value %q: owned = %v, want %v", v, got[v], w)
		}
	}
}
