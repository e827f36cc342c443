package statesvc

import (
	"strings"
	"testing"
)

// PutOwned: a value the writer gave up is what later reads get, not a
// copy of it; a value not given up, or given up inside a much larger
// buffer, is copied; and a reader's value outlives rewrites of its key.
func TestPebblePutOwnedKeepsGivenValues(t *testing.T) {
	for _, volatile := range []bool{false, true} {
		name := "write-through"
		if volatile {
			name = "volatile"
		}
		t.Run(name, func(t *testing.T) {
			p := mustOpen(t, Options{Backend: BackendPebble, Dir: t.TempDir(), Volatile: volatile}).(*Pebble)
			given := []byte(strings.Repeat("g", 2000))
			copied := []byte(strings.Repeat("c", 2000))
			big := make([]byte, 100, 10000) // a small value in a large buffer
			copy(big, strings.Repeat("b", 100))
			kvs := []KV{{Key: []byte("given"), Value: given}, {Key: []byte("copied"), Value: copied}, {Key: []byte("big"), Value: big}}
			if err := PutOwned(p, kvs, []bool{true, false, true}); err != nil {
				t.Fatal(err)
			}
			got, err := p.MultiGet(keys("given", "copied", "big"))
			if err != nil {
				t.Fatal(err)
			}
			if &got[0][0] != &given[0] {
				t.Error("a value given up was copied")
			}
			if &got[1][0] == &copied[0] || string(got[1]) != string(copied) {
				t.Errorf("a value not given up was kept (or changed): same buffer %v", &got[1][0] == &copied[0])
			}
			if &got[2][0] == &big[0] || string(got[2]) != string(big) {
				t.Error("a value given up inside a 100x larger buffer was kept")
			}
			held := got[0]
			if err := PutOwned(p, []KV{{Key: []byte("given"), Value: []byte(strings.Repeat("h", 2000))}}, nil); err != nil {
				t.Fatal(err)
			}
			if string(held) != string(given) {
				t.Fatal("a value a reader holds changed under a rewrite of its key")
			}
			if again, _ := p.MultiGet(keys("given")); !strings.HasPrefix(string(again[0]), "hhh") {
				t.Fatalf("after the rewrite: %.8q", again[0])
			}
		})
	}
}

func TestPebblePutOwnedRejectsMisalignedMarks(t *testing.T) {
	p := mustOpen(t, Options{Backend: BackendPebble, Dir: t.TempDir()}).(*Pebble)
	err := p.PutOwned([]KV{{Key: []byte("a"), Value: []byte("1")}}, []bool{true, false})
	if err == nil || !strings.Contains(err.Error(), "2 ownership marks for 1 writes") {
		t.Fatalf("err = %v, want the count mismatch named", err)
	}
}

// A moved entry's value is a slice of its chunk, followed by the next
// key's bytes: a reader's append must not write over them.
func TestPebbleMovedValueAppendLeavesNeighbours(t *testing.T) {
	p := mustOpen(t, Options{Backend: BackendPebble, Dir: t.TempDir(), Volatile: true}).(*Pebble)
	chunk := AppendPacked(nil, []byte("a"), []byte("first"))
	chunk = AppendPacked(chunk, []byte("b"), []byte("second"))
	if err := PutMoved(p, chunk); err != nil {
		t.Fatal(err)
	}
	got, err := p.MultiGet(keys("a"))
	if err != nil {
		t.Fatal(err)
	}
	_ = append(got[0], "XXXXXXXXXX"...)
	if after, _ := p.MultiGet(keys("a", "b")); string(after[0]) != "first" || string(after[1]) != "second" {
		t.Fatalf("after an append to a's value: %q %q", after[0], after[1])
	}
}
