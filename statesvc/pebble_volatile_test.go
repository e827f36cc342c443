package statesvc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
)

// volatileModel drives a volatile Pebble store and a map side by side.
type volatileModel struct {
	t    *testing.T
	p    *Pebble
	want map[string][]byte // nil value: deleted
}

func volatileKey(i int) []byte {
	return StateKey(nil, "op", i%8, "count", fmt.Appendf(nil, "k%05d", i))
}

// put writes value n for keys i in [from, to), deleting every seventh.
func (m *volatileModel) put(from, to int, n uint64) {
	m.t.Helper()
	var kvs []KV
	for i := from; i < to; i++ {
		k := volatileKey(i)
		v := binary.LittleEndian.AppendUint64(nil, n+uint64(i))
		if (i+int(n))%7 == 0 {
			v = nil
		}
		kvs = append(kvs, KV{Key: k, Value: v})
		m.want[string(k)] = v
	}
	if err := m.p.MultiPut(kvs); err != nil {
		m.t.Fatal(err)
	}
}

// checkGets compares MultiGet and GetCold of p with the model (no Scan:
// it would write every buffered write back).
func (m *volatileModel) checkGets(what string, p *Pebble) {
	m.t.Helper()
	keys := make([][]byte, 0, len(m.want))
	for k := range m.want {
		keys = append(keys, []byte(k))
	}
	for _, get := range []struct {
		name string
		fn   func([][]byte) ([][]byte, error)
	}{{"MultiGet", p.MultiGet}, {"GetCold", p.GetCold}} {
		vals, err := get.fn(keys)
		if err != nil {
			m.t.Fatalf("%s: %s: %v", what, get.name, err)
		}
		for i, k := range keys {
			if want := m.want[string(k)]; !bytes.Equal(vals[i], want) || (vals[i] == nil) != (want == nil) {
				m.t.Fatalf("%s: %s %q = %x, want %x", what, get.name, k, vals[i], want)
			}
		}
	}
}

// check compares MultiGet and Scan of s with the model.
func (m *volatileModel) check(what string, s Store) {
	m.t.Helper()
	keys := make([][]byte, 0, len(m.want))
	live := 0
	for k, v := range m.want {
		keys = append(keys, []byte(k))
		if v != nil {
			live++
		}
	}
	vals, err := s.MultiGet(keys)
	if err != nil {
		m.t.Fatalf("%s: %v", what, err)
	}
	for i, k := range keys {
		if want := m.want[string(k)]; !bytes.Equal(vals[i], want) || (vals[i] == nil) != (want == nil) {
			m.t.Fatalf("%s: %q = %x, want %x", what, k, vals[i], want)
		}
	}
	scanned := 0
	err = s.Scan(nil, nil, func(k, v []byte) bool {
		if want := m.want[string(k)]; want == nil || !bytes.Equal(v, want) {
			m.t.Errorf("%s: scan %q = %x, want %x", what, k, v, want)
		}
		scanned++
		return true
	})
	if err != nil || scanned != live {
		m.t.Fatalf("%s: scan saw %d keys (err %v), want %d", what, scanned, err, live)
	}
}

// TestPebbleVolatileWriteBack: writes buffered in the cache are what
// MultiGet and Scan return, are in a checkpoint taken while they are
// buffered, survive Close, are cut by DeleteRange, and the dirty budget
// keeps the buffered bytes bounded.
func TestPebbleVolatileWriteBack(t *testing.T) {
	for _, cacheBytes := range []int64{0, 64 << 10} { // default, and a budget that forces write-backs
		t.Run(fmt.Sprint(cacheBytes), func(t *testing.T) {
			dir := t.TempDir()
			p, err := OpenPebble(Options{Dir: filepath.Join(dir, "db"), Volatile: true, CacheBytes: cacheBytes})
			if err != nil {
				t.Fatal(err)
			}
			m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
			for round := range 5 {
				m.put(round*100, 2000, uint64(round))
				if budget := p.cache.dirtyBudget(); p.cache.dirtyBytes > budget {
					t.Fatalf("round %d: %d dirty bytes, budget %d", round, p.cache.dirtyBytes, budget)
				}
			}
			if cacheBytes == 0 && p.cache.dirtyLen() == 0 {
				t.Fatal("nothing buffered: the test exercises no write-back")
			}
			m.check("buffered", p)
			m.put(0, 500, 100) // buffered again after the scan wrote everything back
			cp := filepath.Join(dir, "cp")
			if err := p.Checkpoint(cp); err != nil {
				t.Fatal(err)
			}
			atCheckpoint := map[string][]byte{}
			for k, v := range m.want {
				atCheckpoint[k] = v
			}
			m.put(0, 100, 200) // after the checkpoint: not in it
			// A range delete drops buffered writes in the range too.
			m.put(3000, 3100, 1)
			lo, hi := StateKey(nil, "op", 3, "", nil), StateKey(nil, "op", 5, "", nil)
			if err := p.DeleteRange(lo, hi); err != nil {
				t.Fatal(err)
			}
			for k := range m.want {
				if bytes.Compare([]byte(k), lo) >= 0 && bytes.Compare([]byte(k), hi) < 0 {
					m.want[k] = nil
				}
			}
			m.check("after delete range", p)
			m.put(3000, 3100, 2)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			// Without a WAL, Close must have flushed buffer and memtable.
			r, err := OpenPebble(Options{Dir: filepath.Join(dir, "db"), Volatile: true})
			if err != nil {
				t.Fatal(err)
			}
			m.check("reopened", r)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, "restored")
			if err := RestoreCheckpoint(cp, dst); err != nil {
				t.Fatal(err)
			}
			rc, err := OpenPebble(Options{Dir: dst, Volatile: true})
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			m.want = atCheckpoint
			m.check("restored checkpoint", rc)
		})
	}
}

// TestValueCacheOffKeepsBuffering: a write-back cache that switches off
// (few hits) drops its clean entries but keeps the dirty ones and answers
// them, keeps buffering writes while off (only dirty entries then), and
// drops what a write-back wrote; every read sees the newest value
// throughout.
func TestValueCacheOffKeepsBuffering(t *testing.T) {
	p, err := OpenPebble(Options{Dir: t.TempDir(), Volatile: true, CacheBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
	m.put(0, 50, 1) // dirty, well within the budget
	// Lookups of unknown keys only, until the full cache decides to go off.
	for i := 0; !p.cache.off; i += 500 {
		if i > 100*cacheWindow {
			t.Fatal("cache never decided to switch off")
		}
		var ks [][]byte
		for j := range 500 {
			ks = append(ks, volatileKey(100_000+i+j))
		}
		if _, err := p.MultiGet(ks); err != nil {
			t.Fatal(err)
		}
	}
	if p.cache.dirtyLen() != 50 || p.cache.m.len() != 50 {
		t.Fatalf("switched off with %d dirty of %d entries, want the 50 dirty only", p.cache.dirtyLen(), p.cache.m.len())
	}
	m.checkGets("off, dirty entries pending", p)
	m.put(0, 50, 2) // buffered while off, over the pending ones
	if p.cache.dirtyLen() != 50 {
		t.Fatalf("%d dirty entries after rewriting the 50 while off", p.cache.dirtyLen())
	}
	m.checkGets("off, rewritten", p)
	// Far past the dirty budget: write-backs run, and drop what they wrote.
	for round := range 40 {
		m.put(1_000+round*200, 1_200+round*200, uint64(round))
		if n, d := p.cache.m.len(), p.cache.dirtyLen(); n != d {
			t.Fatalf("off cache holds %d entries, %d dirty: clean entries kept", n, d)
		}
	}
	if p.cache.bufferedBytes() > p.cache.dirtyBudget() {
		t.Fatalf("%d dirty bytes, budget %d", p.cache.bufferedBytes(), p.cache.dirtyBudget())
	}
	m.checkGets("off, after write-backs", p)
	m.check("off", p) // the Scan writes everything back
	if p.cache.m.len() != 0 {
		t.Fatalf("%d entries left after a full write-back while off", p.cache.m.len())
	}
}
