package statesvc

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCheckpointRestoreTwice checkpoints a store, restores the checkpoint
// into two directories (its sstables hard-linked, not copied) and reads the
// same values from both; a restore into a non-empty directory is refused.
func TestCheckpointRestoreTwice(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(Options{Dir: filepath.Join(dir, "db")})
	if err != nil {
		t.Fatal(err)
	}
	var kvs []KV
	for i := range 2000 {
		kvs = append(kvs, KV{Key: StateKey(nil, "op", i%16, "count", []byte{byte(i >> 8), byte(i)}), Value: []byte{byte(i)}})
	}
	if err := p.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	if err := p.db.Flush(); err != nil { // into an sstable, so the restore links one
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "cp")
	if err := p.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	if err := p.Checkpoint(cp); err == nil {
		t.Fatal("a second checkpoint into the same directory succeeded")
	}
	// Writes after the checkpoint are not in it.
	if err := p.MultiPut([]KV{{Key: kvs[0].Key, Value: []byte("later")}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"r1", "r2"} {
		dst := filepath.Join(dir, name)
		if err := RestoreCheckpoint(cp, dst); err != nil {
			t.Fatalf("restore %s: %v", name, err)
		}
		r, err := OpenPebble(Options{Dir: dst})
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		keys := make([][]byte, len(kvs))
		for i := range kvs {
			keys[i] = kvs[i].Key
		}
		vals, err := r.MultiGet(keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if string(v) != string(kvs[i].Value) {
				t.Fatalf("%s: key %d = %q, want %q", name, i, v, kvs[i].Value)
			}
		}
		// Writing to a restored store leaves the checkpoint usable.
		if err := r.MultiPut([]KV{{Key: kvs[1].Key, Value: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ssts, _ := filepath.Glob(filepath.Join(cp, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("the checkpoint holds no sstable")
	}
	for _, sst := range ssts {
		st, err := os.Stat(sst)
		if err != nil {
			t.Fatal(err)
		}
		if links := st.Sys().(*syscall.Stat_t).Nlink; links < 3 {
			t.Errorf("%s has %d links, want ≥ 3 (checkpoint + two restores)", filepath.Base(sst), links)
		}
	}
	if err := RestoreCheckpoint(cp, filepath.Join(dir, "r1")); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a used directory: %v, want a 'not empty' error", err)
	}
}
