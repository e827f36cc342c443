package dataplane

import (
	"reflect"
	"testing"
)

func newTestState(names ...string) *State {
	return newState(names, 0)
}

func TestListState(t *testing.T) {
	st := newTestState("count", "items")
	k := []byte("key")
	if got := st.GetList("items", k); got != nil || st.ListLen("items", k) != 0 {
		t.Fatalf("empty list: %q", got)
	}
	st.AppendList("items", k, []byte("a"), []byte(""))
	st.AppendList("items", k, []byte("ccc"))
	want := [][]byte{[]byte("a"), {}, []byte("ccc")}
	if got := st.GetList("items", k); !reflect.DeepEqual(got, want) || st.ListLen("items", k) != 3 {
		t.Fatalf("after appends: %q, want %q", got, want)
	}
	// The list is one value of the key, so it moves with the key.
	if v := st.Get("items", k); !reflect.DeepEqual(v, EncodeList(want)) || !st.isDirty("items", k) {
		t.Fatalf("stored value %q is not the encoded list", v)
	}
	if st.Get("count", k) != nil {
		t.Fatal("list write leaked into another state")
	}
	st.SetList("items", k, [][]byte{[]byte("z")})
	if got := st.GetList("items", k); len(got) != 1 || string(got[0]) != "z" {
		t.Fatalf("after SetList: %q", got)
	}
	st.SetList("items", k, nil)
	if st.Get("items", k) != nil {
		t.Fatal("empty SetList kept a value")
	}
}

func TestDecodeListMalformed(t *testing.T) {
	good := EncodeList([][]byte{[]byte("ab"), []byte("c")})
	bad := append(append([]byte(nil), good...), 0x05, 'x') // claims 5 bytes, has 1
	items, err := DecodeList(bad)
	if err == nil || len(items) != 2 {
		t.Fatalf("malformed list: %q, %v", items, err)
	}
	if _, err := DecodeList([]byte{0xff}); err == nil {
		t.Fatal("truncated varint accepted")
	}
	if items, err := DecodeList([]byte{0x80, 0x00}); err == nil {
		t.Fatalf("overlong length accepted: %q", items)
	}
}

func FuzzDecodeList(f *testing.F) {
	f.Add(EncodeList([][]byte{[]byte("x"), nil}))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := DecodeList(b)
		if err == nil && !reflect.DeepEqual(EncodeList(items), b) {
			t.Fatalf("re-encoding %q gave %q", b, EncodeList(items))
		}
	})
}

// A list write is a buffer made for it, so it is given to the store
// (owned) and sized exactly: the store may keep it as its cached value,
// where spare capacity would be charged and kept alive.
func TestListWritesOwnedAndExact(t *testing.T) {
	st := newTestState("items")
	k := []byte("key")
	slot := func() *stateSlot { return st.slotOf(st.stateIndex("items"), st.index[string(k)]) }
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384} {
		item := make([]byte, n)
		st.SetList("items", k, [][]byte{item, []byte("x")})
		if sl := slot(); !sl.owned || cap(sl.value) != len(sl.value) {
			t.Fatalf("SetList of a %d-byte item: owned %v, len %d cap %d", n, sl.owned, len(sl.value), cap(sl.value))
		}
		st.AppendList("items", k, item)
		if sl := slot(); !sl.owned || cap(sl.value) != len(sl.value) {
			t.Fatalf("AppendList of a %d-byte item: owned %v, len %d cap %d", n, sl.owned, len(sl.value), cap(sl.value))
		}
		if got := st.GetList("items", k); len(got) != 3 || len(got[0]) != n || len(got[2]) != n {
			t.Fatalf("%d-byte items read back as %d items", n, len(got))
		}
	}
}
