package statesvc

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestSettleLeavesNoCompactionDebt builds a store with more L0 files than
// Pebble's compaction threshold (automatic compactions off while writing),
// reopens it with compactions on, and settles it: Settle must return only
// once those files were compacted and nothing runs, and the values must be
// unchanged.
func TestSettleLeavesNoCompactionDebt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	noCompactions := func(po *pebble.Options) { po.DisableAutomaticCompactions = true }
	p, err := OpenPebble(Options{Dir: dir, tune: noCompactions})
	if err != nil {
		t.Fatal(err)
	}
	const flushes, perFlush = 20, 500
	var keys [][]byte
	for f := range flushes {
		kvs := make([]KV, perFlush)
		for i := range kvs {
			k := f*perFlush + i
			kvs[i] = KV{Key: StateKey(nil, "op", k%16, "v", []byte{byte(k >> 16), byte(k >> 8), byte(k)}), Value: bytes.Repeat([]byte{byte(k)}, 3000)}
			keys = append(keys, kvs[i].Key)
		}
		if err := p.MultiPut(kvs); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if l0 := p.db.Metrics().Levels[0].TablesCount; l0 < flushes {
		t.Fatalf("setup: %d L0 tables, want %d", l0, flushes)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p, err = OpenPebble(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := p.Settle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := p.db.Metrics()
	if m.Compact.NumInProgress != 0 || m.Flush.NumInProgress != 0 {
		t.Fatalf("settled with %d compactions and %d flushes running", m.Compact.NumInProgress, m.Flush.NumInProgress)
	}
	if l0 := m.Levels[0].TablesCount; l0 >= 8 {
		t.Fatalf("settled with %d L0 tables (threshold 8): %+v", l0, st)
	}
	if m.Compact.Count == 0 {
		t.Fatalf("no compaction ran: %+v", st)
	}
	vals, err := p.MultiGet(keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if want := byte(i); len(v) != 3000 || v[0] != want {
			t.Fatalf("key %d: value of %d bytes starting %v after settling", i, len(v), v[:min(len(v), 1)])
		}
	}

	// A context that ends first is an error, not a silent early return.
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := p.MultiPut([]KV{{Key: keys[0], Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Settle(done); err == nil {
		t.Fatal("Settle with an ended context returned nil")
	}
}
