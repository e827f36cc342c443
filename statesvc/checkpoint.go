package statesvc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the store into dir, which must not
// exist yet: Pebble hard-links the immutable sstables and copies the
// manifest, options and (flushed) WAL, so a checkpoint of gigabytes of state
// takes milliseconds and no extra space until the store compacts. A
// volatile store first writes its buffered writes and flushes the memtable:
// without a WAL, Pebble's checkpoint holds only what is in sstables.
func (p *Pebble) Checkpoint(dir string) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	// wmu held throughout: no write may land between the flush and the copy.
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.volatile {
		if err := p.flushLocked(); err != nil {
			return fmt.Errorf("statesvc: pebble checkpoint into %s: %w", dir, err)
		}
	}
	if err := p.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("statesvc: pebble checkpoint into %s: %w", dir, err)
	}
	return nil
}

// RestoreCheckpoint makes dst (which must be absent or empty) a Pebble
// directory holding the checkpoint in src. Sstables and blob files (the
// separated values) are hard-linked: they are never modified, and a store
// that compacts them away only drops its own link. Every other file is
// copied, because Pebble appends to its manifest and WAL: the checkpoint
// stays usable for the next restore.
// Where hard links are not possible (another file system) sstables are
// copied too.
func RestoreCheckpoint(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("statesvc: read checkpoint %s: %w", src, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("statesvc: restore into %s: %w", dst, err)
	}
	if left, err := os.ReadDir(dst); err != nil {
		return fmt.Errorf("statesvc: restore into %s: %w", dst, err)
	} else if len(left) > 0 {
		return fmt.Errorf("statesvc: restore into %s: directory is not empty (%d entries)", dst, len(left))
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if strings.HasSuffix(e.Name(), ".sst") || strings.HasSuffix(e.Name(), ".blob") {
			if err := os.Link(from, to); err == nil {
				continue
			}
		}
		if err := copyFile(from, to); err != nil {
			return fmt.Errorf("statesvc: restore %s: %w", e.Name(), err)
		}
	}
	return nil
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	_, err = io.Copy(out, in)
	return err
}
