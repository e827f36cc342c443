package statesvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// CompactStats says what CompactAll did.
type CompactStats struct {
	BlobFilesBefore, BlobFilesAfter uint64        // live blob files
	MaxRefsBefore, MaxRefsAfter     int           // most blob files one sstable references
	Took                            time.Duration // flush and compaction
}

// blobDepth is the MaxBlobReferenceDepth a store's compactions get. It is
// read by Pebble's ValueSeparationPolicy once per compaction, so CompactAll
// can lower it for its own compactions alone.
type blobDepth struct{ v atomic.Int32 }

func (d *blobDepth) get() int {
	if v := d.v.Load(); v > 0 {
		return int(v)
	}
	return blobReferenceDepth
}

// compactedRefs is the most blob files an sstable of a store compacted
// whole references: a table's keys may straddle two of the compaction's
// blob files.
const compactedRefs = 2

// CompactAll compacts the whole store into its bottom level and rewrites
// every separated value into blob files that follow the new sstables' key
// order, so each sstable references one or two blob files.
//
// A warm-up writes gigabytes in a minute or two, every flush's blob file
// spanning the whole key space; its sstables end up referencing 40-80 blob
// files each. A run loading that tree pays for it in its first minute or
// so: the first compactions that reach the bottom level pass
// blobReferenceDepth and rewrite the warm-up's values once (EXPERIMENTS.md,
// "q6* over 2.2 GB"), on whichever task still holds the store then. A job
// that has run for hours has long since paid it. Compacting at the snapshot
// hands every run a tree in that state. Contents do not change.
//
// ctx bounds the wait: a compaction already running finishes, the rest are
// not started, and the store stays consistent either way.
func (p *Pebble) CompactAll(ctx context.Context) (CompactStats, error) {
	var st CompactStats
	start := time.Now()
	if err := p.Flush(); err != nil {
		return st, err
	}
	if err := p.enter(); err != nil {
		return st, err
	}
	defer p.exit()
	st.BlobFilesBefore, st.MaxRefsBefore = p.blobShape()
	if st.MaxRefsBefore <= compactedRefs {
		// Already in key order (compacted before, or written in order):
		// a rewrite would change nothing.
		st.BlobFilesAfter, st.MaxRefsAfter = st.BlobFilesBefore, st.MaxRefsBefore
		st.Took = time.Since(start)
		return st, nil
	}
	p.depth.v.Store(1) // any compaction meeting more than one blob file rewrites
	defer p.depth.v.Store(0)
	// Pebble compacts a level into the next one only, never its bottom
	// level into itself, and a compaction takes only the tables under it
	// that its own tables overlap: a bottom-level table nothing above
	// overlaps keeps its references. So the bounds of every table still
	// referencing many blob files are written again, with their own values,
	// and the compaction carries them down onto that table. Twice at most:
	// a table split off by the first round is caught by the second.
	for range 2 {
		touched, lo, hi, err := p.touchSpread()
		if err != nil {
			st.Took = time.Since(start)
			return st, err
		}
		if touched == 0 {
			break
		}
		// Compact's end is exclusive: one byte past the last key covers it.
		if err := p.db.Compact(ctx, lo, append(hi, 0), true); err != nil {
			st.Took = time.Since(start)
			return st, fmt.Errorf("statesvc: pebble compact all: %w", err)
		}
	}
	st.BlobFilesAfter, st.MaxRefsAfter = p.blobShape()
	st.Took = time.Since(start)
	return st, nil
}

// touchSpread writes again, with its own value, the smallest and largest
// key of every sstable that references more than compactedRefs blob files,
// and returns how many keys it wrote and the range they span. A key deleted
// since (absent from the store) is skipped, so nothing comes back.
func (p *Pebble) touchSpread() (touched int, lo, hi []byte, err error) {
	levels, err := p.db.SSTables()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("statesvc: pebble compact all: list tables: %w", err)
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	b := p.db.NewBatch()
	defer b.Close()
	seen := map[string]bool{}
	for _, ts := range levels {
		for _, t := range ts {
			if len(t.GetBlobReferenceFiles()) <= compactedRefs {
				continue
			}
			for _, k := range [][]byte{t.Smallest.UserKey, t.Largest.UserKey} {
				if seen[string(k)] {
					continue
				}
				seen[string(k)] = true
				v, closer, err := p.db.Get(k)
				if errors.Is(err, pebble.ErrNotFound) {
					continue
				}
				if err != nil {
					return 0, nil, nil, fmt.Errorf("statesvc: pebble compact all: read %q: %w", k, err)
				}
				err = b.Set(k, v, nil)
				closer.Close()
				if err != nil {
					return 0, nil, nil, fmt.Errorf("statesvc: pebble compact all: %w", err)
				}
				touched++
				if lo == nil || bytes.Compare(k, lo) < 0 {
					lo = bytes.Clone(k)
				}
				if hi == nil || bytes.Compare(k, hi) > 0 {
					hi = bytes.Clone(k)
				}
			}
		}
	}
	if touched == 0 {
		return 0, nil, nil, nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, nil, nil, fmt.Errorf("statesvc: pebble compact all: %w", err)
	}
	return touched, lo, hi, nil
}

// blobShape returns the live blob files and the most any sstable
// references.
func (p *Pebble) blobShape() (files uint64, maxRefs int) {
	files = p.db.Metrics().BlobFiles.LiveCount
	levels, err := p.db.SSTables()
	if err != nil {
		return files, 0
	}
	for _, ts := range levels {
		for _, t := range ts {
			maxRefs = max(maxRefs, len(t.GetBlobReferenceFiles()))
		}
	}
	return files, maxRefs
}
