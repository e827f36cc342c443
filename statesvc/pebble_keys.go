package statesvc

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// Key listings for state migration. A task that hands buckets away lists
// their keys (not their values) for the new owner, and an old owner
// serves bucket pulls chunk after chunk. Scan would write every buffered
// write of the whole store to Pebble first, under the store's write lock:
// on a task whose working set sits in the write-back cache that is tens of
// milliseconds during which its own batches cannot write. These calls
// write nothing back and walk the buffered writes once, without the
// cache's lock (readers never wait) and, where they need no consistent
// view of what is buffered, without the write lock either.

// KeyRange is the keys in [Start, End); a nil End is unbounded.
type KeyRange struct{ Start, End []byte }

// rangeOf returns the index of the range of sorted, disjoint ranges that
// holds k, or -1.
func rangeOf(ranges []KeyRange, k string) int {
	i := sort.Search(len(ranges), func(i int) bool {
		return ranges[i].End == nil || string(ranges[i].End) > k
	})
	if i < len(ranges) && k >= string(ranges[i].Start) {
		return i
	}
	return -1
}

func checkRanges(ranges []KeyRange) error {
	for i, r := range ranges {
		if r.End != nil && bytes.Compare(r.Start, r.End) > 0 {
			return fmt.Errorf("statesvc: key range %d ends before it starts", i)
		}
		if i > 0 && (ranges[i-1].End == nil || bytes.Compare(ranges[i-1].End, r.Start) > 0) {
			return fmt.Errorf("statesvc: key ranges %d and %d overlap or are out of order", i-1, i)
		}
	}
	return nil
}

// ExportKeys calls fn once for every live key in ranges (sorted,
// disjoint), in no particular order, like Export but without the values
// and over several ranges at once: it reads the keys of the ranges'
// buffered writes (no copies, one walk for all ranges) and Pebble's keys,
// skipping those a buffered write supersedes. fn's slice is valid only
// during the call; fn must not write the store.
func (p *Pebble) ExportKeys(ranges []KeyRange, fn func(k []byte) bool) error {
	if err := checkRanges(ranges); err != nil {
		return err
	}
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	// Under the write lock the buffered writes stay as they are, and the
	// iterators see Pebble as of the same moment; only what changes under
	// it (whether an entry is a delete) is read there, the keys (which
	// never change) after.
	p.wmu.Lock()
	dirty := p.cache.dirtySnapshot()
	present := make([]bool, len(dirty))
	for i, e := range dirty {
		present[i] = e.present
	}
	its := make([]*pebble.Iterator, 0, len(ranges))
	closeAll := func() {
		for _, it := range its {
			_ = it.Close()
		}
	}
	for _, r := range ranges {
		it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: r.Start, UpperBound: r.End})
		if err != nil {
			p.wmu.Unlock()
			closeAll()
			return fmt.Errorf("statesvc: pebble export keys: %w", err)
		}
		its = append(its, it)
	}
	p.wmu.Unlock()
	defer closeAll()
	newer := map[string]bool{} // buffered key → present
	for i, e := range dirty {
		if rangeOf(ranges, e.key) >= 0 {
			newer[e.key] = present[i]
		}
	}
	var kb []byte
	for k, present := range newer {
		if !present {
			continue
		}
		kb = append(kb[:0], k...)
		if !fn(kb) {
			return nil
		}
	}
	for _, it := range its {
		for ok := it.First(); ok; ok = it.Next() {
			if len(newer) > 0 {
				if _, skip := newer[string(it.Key())]; skip {
					continue
				}
			}
			if !fn(it.Key()) {
				return nil
			}
		}
		if err := it.Error(); err != nil {
			return fmt.Errorf("statesvc: pebble export keys: %w", err)
		}
	}
	return nil
}

// ExportKeys calls fn once for every key of s in ranges (sorted,
// disjoint), in no particular order: Pebble.ExportKeys where s can, else a
// scan per range. fn's slice is valid only during the call; fn must not
// write s.
func ExportKeys(s Store, ranges []KeyRange, fn func(k []byte) bool) error {
	if e, ok := s.(interface {
		ExportKeys(ranges []KeyRange, fn func(k []byte) bool) error
	}); ok {
		return e.ExportKeys(ranges, fn)
	}
	if err := checkRanges(ranges); err != nil {
		return err
	}
	for _, r := range ranges {
		stop := false
		if err := s.Scan(r.Start, r.End, func(k, _ []byte) bool {
			stop = !fn(k)
			return !stop
		}); err != nil || stop {
			return err
		}
	}
	return nil
}

// KeyLister lists keys in key order from any key on (see FrozenKeys).
type KeyLister interface {
	// Keys calls fn for keys in [from, end) in key order until fn
	// returns false; fn's slice is valid only during the call.
	Keys(from, end []byte, fn func(k []byte) bool) error
}

// FrozenKeys returns a KeyLister of the keys in ranges (sorted, disjoint)
// of s, ranges that nobody writes any more except to delete — the buckets
// a task gave away, which their new owners take key by key. An old owner
// serving a bucket's pulls chunk after chunk so resumes where the last
// chunk stopped, instead of walking the bucket from its start over the
// deletes of every key already taken, and without writing the buckets'
// buffered writes back first (as Scan would) or walking the buffered
// writes per chunk: Pebble notes the ranges' buffered keys once, here, and
// merges them with what it holds at each listing.
//
// What a listing misses: nothing live (a key buffered when noted is in the
// note, and in Pebble once written back; a key in Pebble stays until
// deleted). What it may list: keys deleted since; a caller reads the
// keys' values (MultiGet) and skips those without any. Stores without a
// write-back buffer list by a scan, which is exact.
func FrozenKeys(s Store, ranges []KeyRange) (KeyLister, error) {
	if err := checkRanges(ranges); err != nil {
		return nil, err
	}
	if f, ok := s.(interface {
		FrozenKeys(ranges []KeyRange) (KeyLister, error)
	}); ok {
		return f.FrozenKeys(ranges)
	}
	return scanLister{s}, nil
}

type scanLister struct{ s Store }

func (l scanLister) Keys(from, end []byte, fn func(k []byte) bool) error {
	return l.s.Scan(from, end, func(k, _ []byte) bool { return fn(k) })
}

// FrozenKeys implements the store side of statesvc.FrozenKeys.
func (p *Pebble) FrozenKeys(ranges []KeyRange) (KeyLister, error) {
	if err := checkRanges(ranges); err != nil {
		return nil, err
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.exit()
	f := &frozenKeys{p: p}
	for _, e := range p.cache.dirtySnapshot() {
		if rangeOf(ranges, e.key) >= 0 {
			f.buffered = append(f.buffered, e.key)
		}
	}
	slices.Sort(f.buffered)
	f.buffered = slices.Compact(f.buffered)
	return f, nil
}

type frozenKeys struct {
	p        *Pebble
	buffered []string // sorted, distinct keys of the ranges with buffered writes when noted
}

// Keys merges Pebble's keys of [from, end) with the noted buffered ones.
func (f *frozenKeys) Keys(from, end []byte, fn func(k []byte) bool) error {
	if err := f.p.enter(); err != nil {
		return err
	}
	defer f.p.exit()
	if end != nil && bytes.Compare(from, end) >= 0 {
		return nil
	}
	it, err := f.p.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: end})
	if err != nil {
		return fmt.Errorf("statesvc: pebble frozen keys: %w", err)
	}
	defer it.Close()
	buf := f.buffered[sort.SearchStrings(f.buffered, string(from)):]
	var kb []byte
	ok := it.First()
	for {
		inBuf := len(buf) > 0 && (end == nil || buf[0] < string(end))
		if !inBuf && !ok {
			if err := it.Error(); err != nil {
				return fmt.Errorf("statesvc: pebble frozen keys: %w", err)
			}
			return nil
		}
		var k []byte
		advance := false // the iterator's key is listed now
		if inBuf && (!ok || buf[0] <= string(it.Key())) {
			advance = ok && buf[0] == string(it.Key()) // in both: once
			kb = append(kb[:0], buf[0]...)
			k, buf = kb, buf[1:]
		} else {
			k, advance = it.Key(), true
		}
		if !fn(k) {
			return nil
		}
		if advance {
			ok = it.Next()
		}
	}
}

// dirtySnapshot returns the dirty entries as they are listed now. Taken
// under the cache's lock, it is a copy of the list of pointers only: an
// entry's key never changes, and its value and presence only under the
// store's write lock, so a caller reads keys without any lock and, holding
// wmu, the rest too, while readers go on.
func (c *valueCache) dirtySnapshot() []*cachedValue {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.dirty[c.dirtyHead:])
}
