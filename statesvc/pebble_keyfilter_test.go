package statesvc

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestKeyFilterNoFalseNegatives: every key added is reported, across the
// growth into new layers; keys never added mostly are not; past its memory
// bound the filter reports every key.
func TestKeyFilterNoFalseNegatives(t *testing.T) {
	f := newKeyFilter()
	const n = 3 * keyFilterFirstKeys // three layers
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%d", i) }
	for i := range n {
		if i%2 == 0 {
			f.add(key(i))
		} else {
			f.addString(string(key(i)))
		}
	}
	if l := len(*f.layers.Load()); l != 2 {
		t.Fatalf("%d layers for %d keys, want 2", l, n)
	}
	for i := range n {
		if !f.mayContain(key(i)) {
			t.Fatalf("key %d added but not reported", i)
		}
	}
	fp := 0
	const probes = 100_000
	for i := n; i < n+probes; i++ {
		if f.mayContain(key(i)) {
			fp++
		}
	}
	// One layer at 10 bits per key in 512-bit blocks with 6 probes errs on
	// about 1 % of keys; the two layers together on about 2 %.
	if rate := float64(fp) / probes; rate > 0.04 {
		t.Fatalf("false positive rate %.3f, want under 0.04", rate)
	}
	f.off.Store(true)
	if !f.mayContain(key(n + probes + 1)) {
		t.Fatal("a filter switched off ruled a key out")
	}
}

// TestKeyFilterEveryWritePath: on a store opened empty, a key reaches
// Pebble by a write-through, a write-back, a cold write or a moved batch,
// and each is read back from Pebble (cache emptied) — none is ruled out by
// the filter; a store opened on existing data has no filter and reads
// them all.
func TestKeyFilterEveryWritePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	k := func(path string, i int) []byte {
		return StateKey(nil, "op", i%4, "s", fmt.Appendf(nil, "%s-%d", path, i))
	}
	writes := map[string]func(p *Pebble, kvs []KV) error{
		"write-through": func(p *Pebble, kvs []KV) error {
			p.wmu.Lock()
			defer p.wmu.Unlock()
			return p.commitLocked(kvs, nil, "test")
		},
		"write-back": func(p *Pebble, kvs []KV) error { return p.MultiPut(kvs) },
		"cold":       func(p *Pebble, kvs []KV) error { return p.PutCold(kvs) },
		"moved": func(p *Pebble, kvs []KV) error {
			var chunk []byte
			for _, kv := range kvs {
				chunk = AppendPacked(chunk, kv.Key, kv.Value)
			}
			return PutMoved(p, chunk)
		},
	}
	p, err := OpenPebble(Options{Dir: dir, Volatile: true, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if p.written == nil {
		t.Fatal("a store opened empty has no key filter")
	}
	var all [][]byte
	for path, write := range writes {
		var kvs []KV
		for i := range 100 {
			kvs = append(kvs, KV{Key: k(path, i), Value: []byte(path)})
			all = append(all, kvs[i].Key)
		}
		if err := write(p, kvs); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	check := func(what string, p *Pebble) {
		t.Helper()
		if err := p.Scan(nil, nil, func(_, _ []byte) bool { return true }); err != nil {
			t.Fatal(err) // writes every buffered value back
		}
		p.cache.reset()
		vals, err := p.MultiGet(all)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if v == nil {
				t.Fatalf("%s: key %q written but read as absent", what, all[i])
			}
		}
		absent, err := p.MultiGet([][]byte{k("never", 1), k("never", 2), k("never", 3), k("never", 4)})
		if err != nil || absent[0] != nil || absent[3] != nil {
			t.Fatalf("%s: never-written keys read as %q (err %v)", what, absent, err)
		}
	}
	check("opened empty", p)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = OpenPebble(Options{Dir: dir, Volatile: true, CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.written != nil {
		t.Fatal("a store opened on existing data has a key filter that never saw its keys")
	}
	check("reopened", p)
}

// TestCommitSortedKeepsLastWrite: a write-through batch goes to Pebble in
// key order, and of two writes of one key in a batch the later wins, as
// in the caller's order.
func TestCommitSortedKeepsLastWrite(t *testing.T) {
	p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kvs := []KV{{Key: []byte("b"), Value: []byte("b1")}, {Key: []byte("a"), Value: []byte("a1")},
		{Key: []byte("b"), Value: []byte("b2")}, {Key: []byte("c"), Value: []byte("c1")}, {Key: []byte("a")}}
	if got := sortedOrder(kvs); fmt.Sprint(got) != "[1 4 0 2 3]" {
		t.Fatalf("sorted order %v, want [1 4 0 2 3]", got)
	}
	p.wmu.Lock()
	err = p.commitLocked(kvs, nil, "test")
	p.wmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	p.cache.reset()
	vals, err := p.MultiGet([][]byte{[]byte("a"), []byte("b"), []byte("c")})
	if err != nil || vals[0] != nil || string(vals[1]) != "b2" || string(vals[2]) != "c1" {
		t.Fatalf("after the batch: %q (err %v), want absent, b2, c1", vals, err)
	}
}
