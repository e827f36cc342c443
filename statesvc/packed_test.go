package statesvc

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

func TestPackedRoundTripAndErrors(t *testing.T) {
	var b []byte
	want := []KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("k"), Value: []byte{}}, {Key: make([]byte, 300), Value: make([]byte, 70000)}}
	for _, kv := range want {
		n := len(b)
		b = AppendPacked(b, kv.Key, kv.Value)
		if got := len(b) - n; got != PackedSize(len(kv.Key), len(kv.Value)) {
			t.Fatalf("pair of %d+%d bytes packed into %d, PackedSize says %d", len(kv.Key), len(kv.Value), got, PackedSize(len(kv.Key), len(kv.Value)))
		}
	}
	rest := b
	for i, kv := range want {
		k, v, next, err := NextPacked(rest)
		if err != nil || string(k) != string(kv.Key) || string(v) != string(kv.Value) {
			t.Fatalf("pair %d: %q, %d bytes, err %v", i, k, len(v), err)
		}
		rest = next
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
	for name, bad := range map[string][]byte{
		"no length":          {0x80},
		"key past the end":   {5, 'a'},
		"value past the end": {1, 'a', 9, 'b'},
		"value missing":      {1, 'a'},
	} {
		if _, _, _, err := NextPacked(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestMoveOutPacked: both the Pebble store and a store without a packed
// move-out hand out every key of the range once, in chunks within the
// limit, then delete the range; a failed send deletes nothing.
func TestMoveOutPacked(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"pebble": func(t *testing.T) Store {
			p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db"), Volatile: true, CacheBytes: 8 << 20})
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		"memory": func(t *testing.T) Store {
			s, err := Open(Options{Backend: BackendMemory})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			var kvs []KV
			for i := range 3000 {
				kvs = append(kvs, KV{Key: StateKey(nil, "op", i%8, "s", fmt.Appendf(nil, "k%05d", i)), Value: fmt.Appendf(nil, "v%d", i)})
			}
			if err := s.MultiPut(kvs); err != nil {
				t.Fatal(err)
			}
			start, end := BucketRange("op", 2, 5)
			const limit = 4 << 10
			failed := errors.New("link down")
			n := 0
			if err := MoveOutPacked(s, start, end, limit, func([]byte) error {
				if n++; n == 2 {
					return failed
				}
				return nil
			}); !errors.Is(err, failed) {
				t.Fatalf("a failed send returned %v", err)
			}
			got := map[string]string{}
			if err := MoveOutPacked(s, start, end, limit, func(chunk []byte) error {
				if len(chunk) > limit {
					t.Errorf("chunk of %d bytes, limit %d", len(chunk), limit)
				}
				_, err := eachPacked(chunk, func(k, v []byte) bool {
					if _, twice := got[string(k)]; twice {
						t.Errorf("key %q handed out twice", k)
					}
					got[string(k)] = string(v)
					return true
				})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			for _, kv := range kvs {
				_, b, _, _, _ := ParseStateKey(kv.Key)
				moved := b >= 2 && b < 5
				if v, ok := got[string(kv.Key)]; ok != moved || (moved && v != string(kv.Value)) {
					t.Fatalf("key %q (bucket %d): handed out %v as %q", kv.Key, b, ok, v)
				}
				vals, err := s.MultiGet([][]byte{kv.Key})
				if err != nil || (vals[0] != nil) == moved {
					t.Fatalf("key %q (bucket %d) after the move-out: %q (err %v)", kv.Key, b, vals[0], err)
				}
			}
		})
	}
}
