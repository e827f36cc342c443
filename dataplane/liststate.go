package dataplane

import (
	"encoding/binary"
	"errors"

	"koala/dataplane/wire"
)

// List state
//
// A list state is a value state whose value is the list's items, each
// prefixed by its length as a uvarint. One list is one value per key, so it
// is read with the batch's multi-get, written with its multi-put and moved
// by lazy migration exactly like any other value. Declare list states in
// StateNames like value states; the same name must not be used both ways.

// GetList returns the items of list state for key (nil when empty). The
// items alias the stored value and must not be modified. A value that is
// not a valid list yields the items before the damage.
func (s *State) GetList(state string, key []byte) [][]byte {
	items, _ := DecodeList(s.Get(state, key))
	return items
}

// ListLen returns the number of items of list state for key.
func (s *State) ListLen(state string, key []byte) int {
	n := 0
	_ = walkList(s.Get(state, key), func([]byte) bool { n++; return true })
	return n
}

// AppendList adds items at the end of list state for key. The items are
// copied.
func (s *State) AppendList(state string, key []byte, items ...[]byte) {
	if len(items) == 0 {
		return
	}
	old := s.Get(state, key)
	v := make([]byte, len(old), len(old)+encodedListSize(items))
	copy(v, old)
	// v is made here for this write, so the store may keep it instead of
	// copying it again: a list is rewritten whole on every change, and the
	// trace queries' windows are 0.3–3 KB.
	s.PutOwned(state, key, AppendListItems(v, items...))
}

// SetList replaces list state for key; an empty list deletes the value.
func (s *State) SetList(state string, key []byte, items [][]byte) {
	if len(items) == 0 {
		s.Delete(state, key)
		return
	}
	s.PutOwned(state, key, EncodeList(items)) // a new buffer, as in AppendList
}

// EncodeList encodes items in the list state layout, in a buffer of
// exactly that size: a store that keeps the buffer as its cached value
// then charges no spare capacity.
func EncodeList(items [][]byte) []byte {
	return AppendListItems(make([]byte, 0, encodedListSize(items)), items...)
}

// encodedListSize is the size of items in the list state layout.
func encodedListSize(items [][]byte) int {
	size := 0
	for _, it := range items {
		size += wire.UvarintSize(uint64(len(it))) + len(it)
	}
	return size
}

// AppendListItems appends items, encoded, to an encoded list.
func AppendListItems(list []byte, items ...[]byte) []byte {
	for _, it := range items {
		list = binary.AppendUvarint(list, uint64(len(it)))
		list = append(list, it...)
	}
	return list
}

var errBadList = errors.New("list state value is malformed")

// DecodeList splits an encoded list. On malformed input it returns the
// items before the damage and an error.
func DecodeList(v []byte) ([][]byte, error) {
	var out [][]byte
	err := walkList(v, func(it []byte) bool { out = append(out, it); return true })
	return out, err
}

func walkList(v []byte, fn func([]byte) bool) error {
	for len(v) > 0 {
		n, k := binary.Uvarint(v)
		// A length in more bytes than needed (a zero last group, as in
		// 0x80 0x00) is not what AppendListItems writes: reject it so
		// that every accepted value has one encoding.
		if k <= 0 || (k > 1 && v[k-1] == 0) || n > uint64(len(v)-k) {
			return errBadList
		}
		it := v[k : k+int(n) : k+int(n)]
		v = v[k+int(n):]
		if !fn(it) {
			return nil
		}
	}
	return nil
}
