package statesvc

import (
	"bytes"
	"path/filepath"
	"testing"
)

// dirtyPerBucket counts the buffered writes of volatileKey's buckets.
func dirtyPerBucket(p *Pebble) map[int]int {
	n := map[int]int{}
	for b := range 8 {
		lo, hi := BucketRange("op", b, b+1)
		es, _, _ := p.cache.dirtyEntriesInRange(lo, hi)
		n[b] = len(es)
	}
	return n
}

// TestPebbleVolatileScanWritesBackItsRange: a Scan of some buckets sees
// their buffered writes and writes back only those; the other buckets'
// writes stay buffered, every read still sees the newest value, and Close
// keeps them all, with the cache on and off.
func TestPebbleVolatileScanWritesBackItsRange(t *testing.T) {
	for _, off := range []bool{false, true} {
		name := "on"
		if off {
			name = "off"
		}
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			p, err := OpenPebble(Options{Dir: dir, Volatile: true})
			if err != nil {
				t.Fatal(err)
			}
			if off {
				p.cache.mu.Lock()
				p.cache.off = true
				p.cache.mu.Unlock()
			}
			m := &volatileModel{t: t, p: p, want: map[string][]byte{}}
			m.put(0, 2000, 1)
			m.put(0, 1000, 2) // rewrites of buffered keys
			before := dirtyPerBucket(p)
			for b, n := range before {
				if n == 0 {
					t.Fatalf("bucket %d: nothing buffered, the test exercises no write-back", b)
				}
			}

			lo, hi := BucketRange("op", 2, 4)
			live := 0
			for k, v := range m.want {
				if v != nil && bytes.Compare([]byte(k), lo) >= 0 && bytes.Compare([]byte(k), hi) < 0 {
					live++
				}
			}
			scanned := 0
			err = p.Scan(lo, hi, func(k, v []byte) bool {
				if want := m.want[string(k)]; want == nil || !bytes.Equal(v, want) {
					t.Errorf("scan %q = %x, want %x", k, v, want)
				}
				scanned++
				return true
			})
			if err != nil || scanned != live {
				t.Fatalf("scan of buckets 2-3 saw %d keys (err %v), want %d", scanned, err, live)
			}
			after := dirtyPerBucket(p)
			for b := range 8 {
				want := before[b]
				if b == 2 || b == 3 {
					want = 0
				}
				if after[b] != want {
					t.Errorf("bucket %d: %d buffered writes after the scan, want %d (before: %d)", b, after[b], want, before[b])
				}
			}
			if got, want := p.cache.dirtyLen(), after[0]+after[1]+after[4]+after[5]+after[6]+after[7]; got != want {
				t.Errorf("dirty list holds %d entries, want the %d still buffered", got, want)
			}

			m.put(500, 700, 3) // buffered again, in the scanned buckets too
			m.checkGets("after the scan", p)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := OpenPebble(Options{Dir: dir, Volatile: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			m.check("reopened", r)
		})
	}
}
