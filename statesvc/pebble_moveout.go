package statesvc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MoveOutPacked hands every live key of [start, end) to send, packed
// (packed.go) in chunks of at most limit bytes (a chunk holds one pair at
// least), in no particular order, and then deletes the range: Pebble's
// keys by one range tombstone, the cache's entries by the bucket maps that
// hold nothing else and one by one in the others. It is a bulk state
// move's old-owner side, and the caller guarantees what makes it cheap:
// nothing else reads or writes the range meanwhile (the task handed those
// buckets away and no longer touches them). So the buffered writes are
// packed in place rather than written to Pebble first, only the keys
// handed out leave the cache, and no set of superseded keys is built when
// Pebble holds none of the range. A chunk is the caller's to keep; send
// must not write the store. If send fails, nothing is deleted and its
// error is returned.
func (p *Pebble) MoveOutPacked(start, end []byte, limit int, send func(chunk []byte) error) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	// Pebble's keys go in chunks of their own, after the buffered ones.
	pk := &packer{limit: limit, send: send}
	d, onDisk, err := p.exportRange(start, end, limit, true, send, pk.add)
	if err == nil {
		err = pk.flush()
	}
	if err != nil {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.cache.forget(&d, onDisk)
	// Always a tombstone: a write-back by another writer since the
	// iterator was made may have put buffered values of the range in
	// Pebble.
	b := p.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(start, end, nil); err != nil {
		return fmt.Errorf("statesvc: pebble move out: delete range: %w", err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("statesvc: pebble move out: delete range: commit: %w", err)
	}
	return nil
}

// MoveOut is MoveOutPacked calling fn for every key (fn's slices are valid
// only during the call); if fn stops the move (returns false) nothing is
// deleted.
func (p *Pebble) MoveOut(start, end []byte, fn func(k, v []byte) bool) error {
	err := p.MoveOutPacked(start, end, 0, func(chunk []byte) error {
		if all, err := eachPacked(chunk, fn); err != nil || !all {
			return errors.Join(err, errStopped)
		}
		return nil
	})
	if errors.Is(err, errStopped) {
		return nil
	}
	return err
}
