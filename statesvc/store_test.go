package statesvc

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// backends lists every Store implementation the conformance tests cover.
var backends = []struct {
	name string
	open func(t testing.TB) Store
}{
	{"memory", func(t testing.TB) Store { return mustOpen(t, Options{Backend: BackendMemory}) }},
	{"pebble", func(t testing.TB) Store { return mustOpen(t, Options{Backend: BackendPebble, Dir: t.TempDir()}) }},
	{"pebble-volatile", func(t testing.TB) Store {
		return mustOpen(t, Options{Backend: BackendPebble, Dir: t.TempDir(), Volatile: true})
	}},
	// A value cache of 4 KB: writes back after a few dozen keys.
	{"pebble-volatile-tiny", func(t testing.TB) Store {
		return mustOpen(t, Options{Backend: BackendPebble, Dir: t.TempDir(), Volatile: true, CacheBytes: 16 << 10})
	}},
}

func mustOpen(t testing.TB, o Options) Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%+v): %v", o, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func forEachBackend(t *testing.T, fn func(t *testing.T, s Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.open(t)) })
	}
}

func keys(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func scanAll(t *testing.T, s Store, start, end []byte) string {
	t.Helper()
	var parts []string
	if err := s.Scan(start, end, func(k, v []byte) bool {
		parts = append(parts, string(k)+"="+string(v))
		return true
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return strings.Join(parts, ",")
}

func TestStoreGetPutDelete(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		if err := s.MultiPut([]KV{{[]byte("a"), []byte("1")}, {[]byte("b"), []byte("2")}, {[]byte("e"), []byte{}}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.MultiGet(keys("a", "x", "b", "a", "e"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"1", "<nil>", "2", "1", ""}
		for i, v := range got {
			g := string(v)
			if v == nil {
				g = "<nil>"
			}
			if g != want[i] {
				t.Fatalf("MultiGet[%d] = %q, want %q", i, g, want[i])
			}
		}
		// Overwrite, delete, and last write wins within one batch.
		if err := s.MultiPut([]KV{{[]byte("a"), []byte("10")}, {[]byte("b"), nil}, {[]byte("c"), []byte("x")}, {[]byte("c"), []byte("3")}, {[]byte("zz"), nil}}); err != nil {
			t.Fatal(err)
		}
		if got := scanAll(t, s, nil, nil); got != "a=10,c=3,e=" {
			t.Fatalf("after second batch: %s", got)
		}
		if got, _ := s.MultiGet(nil); len(got) != 0 {
			t.Fatalf("MultiGet(nil) = %v", got)
		}
		if s.ApproxSize() == 0 {
			t.Fatal("ApproxSize = 0 with live data")
		}
	})
}

// Values a MultiGet returned are the reader's to keep (not to modify):
// later writes of their keys, and appends to them, leave them and the
// stored values as they were; the caller's buffers stay its own.
func TestStoreValuesStayValid(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		k, v := []byte("key"), []byte("value")
		if err := s.MultiPut([]KV{{k, v}, {[]byte("k2"), []byte("v2")}}); err != nil {
			t.Fatal(err)
		}
		k[0], v[0] = 'X', 'X' // caller reuses its buffers
		got, _ := s.MultiGet(keys("key", "k2"))
		if string(got[0]) != "value" {
			t.Fatalf("store aliased the caller's value: %q", got[0])
		}
		_ = append(got[0], "tail"...) // a reader appends to a value
		// Rewrites of the same keys, the same size (a cache that reused
		// the value's buffer would change what the reader holds).
		if err := s.MultiPut([]KV{{[]byte("key"), []byte("VALUE")}, {[]byte("k2"), []byte("V2")}}); err != nil {
			t.Fatal(err)
		}
		if string(got[0]) != "value" || string(got[1]) != "v2" {
			t.Fatalf("values held by a reader changed under a later write: %q %q", got[0], got[1])
		}
		again, _ := s.MultiGet(keys("key", "k2"))
		if string(again[0]) != "VALUE" || string(again[1]) != "V2" {
			t.Fatalf("after the rewrite: %q %q", again[0], again[1])
		}
	})
}

func TestStoreScanOrderAndBounds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		var kvs []KV
		for _, k := range []string{"d", "b", "a", "c", "ca", "e", "\x00", "\xff"} {
			kvs = append(kvs, KV{[]byte(k), []byte(strings.ToUpper(strings.ReplaceAll(k, "\xff", "Z")))})
		}
		if err := s.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ start, end, want string }{
			{"", "", "\x00=\x00,a=A,b=B,c=C,ca=CA,d=D,e=E,\xff=Z"},
			{"b", "d", "b=B,c=C,ca=CA"},
			{"bb", "ca", "c=C"},
			{"c", "c", ""},
			{"d", "b", ""},
			{"e", "", "e=E,\xff=Z"},
			{"", "b", "\x00=\x00,a=A"},
		} {
			var start, end []byte
			if c.start != "" {
				start = []byte(c.start)
			}
			if c.end != "" {
				end = []byte(c.end)
			}
			if got := scanAll(t, s, start, end); got != c.want {
				t.Errorf("Scan(%q, %q) = %q, want %q", c.start, c.end, got, c.want)
			}
		}
		n := 0
		_ = s.Scan(nil, nil, func(k, v []byte) bool { n++; return n < 3 })
		if n != 3 {
			t.Fatalf("scan did not stop: %d calls", n)
		}
		// Writes after a scan show up in the next scan (index maintenance).
		_ = s.MultiPut([]KV{{[]byte("bb"), []byte("BB")}, {[]byte("c"), nil}})
		if got := scanAll(t, s, []byte("b"), []byte("d")); got != "b=B,bb=BB,ca=CA" {
			t.Fatalf("after writes: %q", got)
		}
	})
}

func TestStoreDeleteRangeBuckets(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		var kvs []KV
		for _, op := range []string{"agg", "aggx"} {
			for b := 0; b < 8; b++ {
				for _, st := range []string{"count", "sum"} {
					kvs = append(kvs, KV{StateKey(nil, op, b, st, []byte{byte(b), 1}), []byte(fmt.Sprint(b))})
				}
			}
		}
		if err := s.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
		count := func(start, end []byte) int {
			n := 0
			if err := s.Scan(start, end, func(k, v []byte) bool { n++; return true }); err != nil {
				t.Fatal(err)
			}
			return n
		}
		start, end := BucketRange("agg", 2, 5)
		if n := count(start, end); n != 6 {
			t.Fatalf("bucket range 2..5 holds %d keys, want 6", n)
		}
		if err := s.DeleteRange(start, end); err != nil {
			t.Fatal(err)
		}
		if n := count(nil, nil); n != 32-6 {
			t.Fatalf("after DeleteRange: %d keys, want 26", n)
		}
		p := BucketPrefix("agg", 1)
		if n := count(p, PrefixEnd(p)); n != 2 {
			t.Fatalf("bucket 1 holds %d keys, want 2", n)
		}
		// Unbounded end deletes through the end of the key space.
		all, _ := BucketRange("aggx", 0, MaxBuckets)
		if err := s.DeleteRange(all, nil); err != nil {
			t.Fatal(err)
		}
		if n := count(nil, nil); n != 10 {
			t.Fatalf("after open-ended DeleteRange: %d keys, want 10", n)
		}
		if err := s.DeleteRange(nil, nil); err != nil {
			t.Fatal(err)
		}
		if n := count(nil, nil); n != 0 {
			t.Fatalf("after DeleteRange(nil, nil): %d keys", n)
		}
	})
}

func TestStoreClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := s.MultiGet(keys("a")); !errors.Is(err, ErrClosed) {
			t.Fatalf("MultiGet after Close: %v", err)
		}
		if err := s.MultiPut([]KV{{[]byte("a"), []byte("1")}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("MultiPut after Close: %v", err)
		}
		if err := s.Scan(nil, nil, func(k, v []byte) bool { return true }); !errors.Is(err, ErrClosed) {
			t.Fatalf("Scan after Close: %v", err)
		}
		if err := s.DeleteRange(nil, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("DeleteRange after Close: %v", err)
		}
		_ = s.ApproxSize()
	})
}

// TestStoreConcurrent runs a writer task, readers and scanners at once (the
// owning task plus fetch handlers); run with -race.
func TestStoreConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, s Store) {
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					k := []byte(fmt.Sprintf("k%02d-%03d", w, i%50))
					var kv KV
					if i%7 == 0 {
						kv = KV{k, nil}
					} else {
						kv = KV{k, []byte(fmt.Sprint(i))}
					}
					if err := s.MultiPut([]KV{kv}); err != nil {
						t.Error(err)
						return
					}
					if _, err := s.MultiGet([][]byte{k, []byte("k00-001")}); err != nil {
						t.Error(err)
						return
					}
					if i%40 == 0 {
						prev := []byte(nil)
						err := s.Scan(nil, nil, func(k, v []byte) bool {
							if prev != nil && bytes.Compare(prev, k) >= 0 {
								t.Errorf("scan out of order: %q then %q", prev, k)
							}
							prev = append(prev[:0], k...)
							return true
						})
						if err != nil {
							t.Error(err)
						}
						_ = s.ApproxSize()
					}
				}
			}()
		}
		wg.Wait()
	})
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string // substring of the error, "" = valid
	}{
		{Options{Backend: "memory"}, ""},
		{Options{Backend: "pebble", Dir: "/tmp/x"}, ""},
		{Options{Backend: "pebble"}, "Options.Dir"},
		{Options{Backend: "rocks"}, `"memory", "pebble"`},
		{Options{Backend: ""}, "Options.Backend"},
		{Options{Backend: "remote-pebble"}, "Options.Addrs"},
		{Options{Backend: "remote-pebble", Addrs: []string{"127.0.0.1:7600"}}, "Options.Namespace"},
		{Options{Backend: "remote-pebble", Addrs: []string{"127.0.0.1:7600"}, Namespace: strings.Repeat("j", MaxNamespaceLen+1)}, "at most 1024"},
		{Options{Backend: "remote-pebble", Addrs: []string{"127.0.0.1:7600"}, Namespace: "job-1"}, ""},
		{Options{Backend: "memory", CacheBytes: -1}, "Options.CacheBytes"},
		{Options{Backend: "memory", MemTableBytes: 4 << 30}, "Options.MemTableBytes"},
	} {
		err := c.o.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", c.o, err, c.want)
		}
	}
	if _, err := Open(Options{Backend: "nope"}); err == nil {
		t.Fatal("Open accepted a bad backend")
	}
}

func TestPebbleReopenAndMultiGetVariants(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var kvs []KV
	for i := 0; i < 100; i += 2 {
		kvs = append(kvs, KV{[]byte(fmt.Sprintf("k%03d", i)), []byte(fmt.Sprint(i))})
	}
	if err := p.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil { // exercise sstable reads too
		t.Fatal(err)
	}
	ks := keys("k010", "k011", "k000", "k098", "k010", "zzz", "a")
	a, err1 := p.multiGetPoint(ks)
	b, err2 := p.multiGetIter(ks)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	for i := range ks {
		if !bytes.Equal(a[i], b[i]) || (a[i] == nil) != (b[i] == nil) {
			t.Fatalf("variants differ at %q: %q vs %q", ks[i], a[i], b[i])
		}
	}
	if string(a[0]) != "10" || a[1] != nil || string(a[3]) != "98" {
		t.Fatalf("unexpected values %q", a)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p2, err := OpenPebble(Options{Dir: dir}) // NoSync writes survive a clean close
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	got, _ := p2.MultiGet(keys("k042"))
	if string(got[0]) != "42" {
		t.Fatalf("after reopen: %q", got[0])
	}
}
