package statesvc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkpointOf writes n keys with valueBytes-byte values into a Pebble
// store, checkpoints it and returns the checkpoint and what it holds.
func checkpointOf(t *testing.T, n, valueBytes int) (string, []KV) {
	t.Helper()
	dir := t.TempDir()
	p, err := OpenPebble(Options{Dir: filepath.Join(dir, "db"), Volatile: true})
	if err != nil {
		t.Fatal(err)
	}
	var kvs []KV
	for i := range n {
		v := bytes.Repeat([]byte{byte(i)}, valueBytes)
		kvs = append(kvs, KV{Key: StateKey(nil, "op", i%16, "state", []byte{byte(i >> 16), byte(i >> 8), byte(i)}), Value: v})
	}
	if err := p.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(dir, "cp")
	if err := p.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return cp, kvs
}

// TestImportCheckpointIntoRemote loads a checkpoint into a remote-pebble
// namespace served by a real state server (a remote store has no directory
// to restore into) twice from the same checkpoint, and reads every value
// back.
func TestImportCheckpointIntoRemote(t *testing.T) {
	const n, valueBytes = 5000, 300
	cp, kvs := checkpointOf(t, n, valueBytes)
	addrs := startServers(t, 2)
	for _, ns := range []string{"job-a", "job-b"} {
		r := mustOpenRemote(t, addrs, RemoteOptions{Namespace: ns})
		scratch := filepath.Join(t.TempDir(), "import")
		keys, written, err := ImportCheckpoint(cp, scratch, r, 64<<10)
		if err != nil {
			t.Fatalf("%s: import: %v", ns, err)
		}
		var want int64
		for _, kv := range kvs {
			want += int64(len(kv.Key) + len(kv.Value))
		}
		if keys != n || written != want {
			t.Fatalf("%s: imported %d keys, %d bytes; want %d keys, %d bytes", ns, keys, written, n, want)
		}
		if _, err := os.Stat(scratch); !os.IsNotExist(err) {
			t.Fatalf("%s: scratch directory %s left behind (stat: %v)", ns, scratch, err)
		}
		got := make([][]byte, len(kvs))
		for i := range kvs {
			got[i] = kvs[i].Key
		}
		vals, err := r.MultiGet(got)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if !bytes.Equal(v, kvs[i].Value) {
				t.Fatalf("%s: key %d: got %d bytes, want %d bytes of %d", ns, i, len(v), valueBytes, kvs[i].Value[0])
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// failingStore refuses every write after the first ok.
type failingStore struct {
	*Memory
	ok int
}

var errRefused = errors.New("refused")

func (f *failingStore) MultiPut(kvs []KV) error {
	if f.ok == 0 {
		return errRefused
	}
	f.ok--
	return f.Memory.MultiPut(kvs)
}

// TestImportCheckpointErrors: a store that refuses a write fails the
// import, saying how many keys were written; a bad batch size and a
// missing checkpoint are refused before anything is written.
func TestImportCheckpointErrors(t *testing.T) {
	cp, _ := checkpointOf(t, 3000, 100)
	dst := &failingStore{Memory: NewMemory(), ok: 1}
	_, _, err := ImportCheckpoint(cp, filepath.Join(t.TempDir(), "s"), dst, 16<<10)
	if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "keys written") {
		t.Fatalf("import into a failing store: %v, want the store's error and the keys written", err)
	}
	if _, _, err := ImportCheckpoint(cp, filepath.Join(t.TempDir(), "s"), NewMemory(), 0); err == nil || !strings.Contains(err.Error(), "want > 0") {
		t.Fatalf("batch of 0 bytes: %v", err)
	}
	if _, _, err := ImportCheckpoint(filepath.Join(t.TempDir(), "none"), filepath.Join(t.TempDir(), "s"), NewMemory(), 1<<20); err == nil {
		t.Fatal("import of a missing checkpoint succeeded")
	}
}
