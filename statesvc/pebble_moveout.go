package statesvc

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// MoveOut hands every live key of [start, end) to fn, in no particular
// order, and then deletes the range: Pebble's keys by one range tombstone,
// the cache's entries (buffered writes included) one by one. It is a bulk
// state move's old-owner side, and the caller guarantees what makes it
// cheap: nothing else reads or writes the range meanwhile (the task handed
// those buckets away and no longer touches them). So the buffered writes
// are read in place rather than written to Pebble first, only the keys
// handed out leave the cache (Export followed by DeleteRange would walk
// the whole cache), and no set of superseded keys is built when Pebble
// holds none of the range. fn's slices are valid only during the call; fn
// must not write the store. If fn stops the move (returns false) nothing is
// deleted.
func (p *Pebble) MoveOut(start, end []byte, fn func(k, v []byte) bool) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	buffered, whole, onDisk, stopped, err := p.exportRange(start, end, true, fn)
	if err != nil || stopped {
		return err
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.cache.forget(buffered, onDisk, whole)
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
