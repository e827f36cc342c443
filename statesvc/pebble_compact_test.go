package statesvc

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestCompactAllRewritesValuesInKeyOrder writes keys over many flushes,
// each flush's keys spread over the whole key space and so its blob file
// too, as a warm-up does. Compactions that keep those references leave
// sstables pointing into many blob files; CompactAll must leave each
// pointing into at most two, every value unchanged, and the store's own
// depth back at blobReferenceDepth.
func TestCompactAllRewritesValuesInKeyOrder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	// Compactions off while writing: with so few keys Pebble would
	// otherwise fold the flushes into one bottom-level table at once.
	noCompactions := func(po *pebble.Options) { po.DisableAutomaticCompactions = true }
	p, err := OpenPebble(Options{Dir: dir, tune: noCompactions})
	if err != nil {
		t.Fatal(err)
	}
	const rounds, perRound = 24, 100
	want := map[string][]byte{}
	for r := range rounds {
		kvs := make([]KV, perRound)
		for j := range kvs {
			i := j*rounds + r
			k := StateKey(nil, "op", i%16, "v", fmt.Appendf(nil, "key-%05d", i))
			kvs[j] = KV{Key: k, Value: bytes.Repeat(fmt.Appendf(nil, "%d/%d;", r, i), 200)}
			want[string(k)] = kvs[j].Value
		}
		if err := p.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p, err = OpenPebble(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := p.CompactAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", st)
	if st.MaxRefsBefore < 4 {
		t.Fatalf("setup: an sstable references at most %d blob files before; want the warm-up's spread (≥ 4)", st.MaxRefsBefore)
	}
	if st.MaxRefsAfter > 2 || st.BlobFilesAfter >= st.BlobFilesBefore {
		t.Fatalf("after CompactAll an sstable references up to %d blob files (want ≤ 2), %d blob files against %d before", st.MaxRefsAfter, st.BlobFilesAfter, st.BlobFilesBefore)
	}
	if d := p.depth.get(); d != blobReferenceDepth {
		t.Fatalf("depth after CompactAll %d, want %d", d, blobReferenceDepth)
	}
	got := map[string][]byte{}
	if err := p.Scan(nil, []byte{0xff}, func(k, v []byte) bool {
		got[string(k)] = bytes.Clone(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys after CompactAll, want %d", len(got), len(want))
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Fatalf("key %q changed by CompactAll", k)
		}
	}
}

// TestCompactAllEmptyStore returns at once on a store with no keys.
func TestCompactAllEmptyStore(t *testing.T) {
	p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.CompactAll(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCompactAllTwiceRewritesOnce: a store already compacted whole is left
// as it is (a retried snapshot does not rewrite gigabytes again).
func TestCompactAllTwiceRewritesOnce(t *testing.T) {
	p, err := OpenPebble(Options{Dir: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for r := range 6 {
		kvs := make([]KV, 50)
		for j := range kvs {
			kvs[j] = KV{Key: StateKey(nil, "op", 0, "v", fmt.Appendf(nil, "k%04d", j*6+r)), Value: bytes.Repeat([]byte{byte(r)}, 1500)}
		}
		if err := p.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.CompactAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := p.db.Metrics().Compact.Count
	st, err := p.CompactAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := p.db.Metrics().Compact.Count - before; n != 0 || st.MaxRefsAfter > compactedRefs {
		t.Fatalf("second CompactAll ran %d compactions (want 0), max refs %d", n, st.MaxRefsAfter)
	}
}
