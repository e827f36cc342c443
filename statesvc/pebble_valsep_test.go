package statesvc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestValueSeparation: kilobyte values go to blob files (compactions move
// references, not the values), small ones and a store with separation off
// keep them inline; a checkpoint of separated values restores (blob files
// hard-linked) and reads back every value.
func TestValueSeparation(t *testing.T) {
	for _, tc := range []struct {
		name       string
		sep, value int
		wantBlobs  bool
	}{
		{"2KB values, default", 0, 2048, true},
		{"8-byte values, default", 0, 8, false},
		{"2KB values, off", -1, 2048, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := OpenPebble(Options{Dir: filepath.Join(dir, "db"), Volatile: true, ValueSeparationBytes: tc.sep})
			if err != nil {
				t.Fatal(err)
			}
			var kvs []KV
			for i := range 3000 {
				kvs = append(kvs, KV{Key: StateKey(nil, "op", i%16, "s", []byte{byte(i >> 8), byte(i)}), Value: bytes.Repeat([]byte{byte(i)}, tc.value)})
			}
			if err := p.MultiPut(kvs); err != nil {
				t.Fatal(err)
			}
			cp := filepath.Join(dir, "cp")
			if err := p.Checkpoint(cp); err != nil { // flushes: the values reach files
				t.Fatal(err)
			}
			blobs := p.db.Metrics().BlobFiles.Local.LiveSize
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if got := blobs > 0; got != tc.wantBlobs {
				t.Fatalf("blob files hold %d bytes; want separated values: %v", blobs, tc.wantBlobs)
			}
			dst := filepath.Join(dir, "restored")
			if err := RestoreCheckpoint(cp, dst); err != nil {
				t.Fatal(err)
			}
			if tc.wantBlobs {
				entries, err := os.ReadDir(dst)
				if err != nil {
					t.Fatal(err)
				}
				linked := 0
				for _, e := range entries {
					info, err := os.Stat(filepath.Join(dst, e.Name()))
					if err != nil {
						t.Fatal(err)
					}
					if strings.HasSuffix(e.Name(), ".blob") && info.Sys().(*syscall.Stat_t).Nlink > 1 {
						linked++
					}
				}
				if linked == 0 {
					t.Fatalf("no blob file of the checkpoint was hard-linked into %s", dst)
				}
			}
			r, err := OpenPebble(Options{Dir: dst, Volatile: true, ValueSeparationBytes: tc.sep})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			keys := make([][]byte, len(kvs))
			for i := range kvs {
				keys[i] = kvs[i].Key
			}
			vals, err := r.MultiGet(keys)
			if err != nil {
				t.Fatal(err)
			}
			for i := range vals {
				if !bytes.Equal(vals[i], kvs[i].Value) {
					t.Fatalf("key %d: restored value of %d bytes differs", i, len(vals[i]))
				}
			}
		})
	}
}
