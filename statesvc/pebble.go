package statesvc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// Pebble is the local Pebble backend. Safe for concurrent use.
type Pebble struct {
	db    *pebble.DB
	cache *valueCache
	// volatile: no WAL, and written values wait in the cache (write-back)
	// until their budget is used up or something reads Pebble directly.
	volatile bool
	// written filters out reads of keys never written (pebble_keyfilter.go);
	// nil for a store opened on existing data.
	written *keyFilter
	// depth is its compactions' blob reference depth (pebble_compact.go).
	depth *blobDepth

	// wmu serializes writers (MultiPut, DeleteRange, write-backs), so the
	// dirty entries a write-back takes cannot change before it marks them
	// written.
	wmu sync.Mutex

	// In-flight tracking so Close waits for running calls (Pebble panics on
	// use after close and refuses to close with open iterators) while calls
	// made after Close, even from inside a Scan callback, fail fast.
	mu     sync.Mutex
	cond   sync.Cond
	active int
	closed bool
}

// OpenPebble opens (creating if needed) a Pebble store in o.Dir.
func OpenPebble(o Options) (*Pebble, error) {
	if o.Backend == "" {
		o.Backend = BackendPebble
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "pebble", "dir", o.Dir)
	// Pebble reserves memtable memory inside the block cache; add room for
	// the memtables that may queue (memTableStopWrites) so CacheBytes stays
	// available for blocks (with cache <= reservations, nothing is cached).
	cache := pebble.NewCache(o.CacheBytes + memTableStopWrites*o.MemTableBytes)
	defer cache.Unref() // the DB holds its own reference
	var stall stallClock
	depth := new(blobDepth)
	opts := &pebble.Options{
		Cache:                       cache,
		MemTableSize:                uint64(o.MemTableBytes),
		MemTableStopWritesThreshold: memTableStopWrites,
		FormatMajorVersion:          pebble.FormatNewest,
		Logger:                      slogLogger{log},
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { log.Warn("pebble background error", "err", err) },
			WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
				stall.begin()
				log.Warn("pebble write stall", "reason", info.Reason)
			},
			WriteStallEnd: func() {
				log.Warn("pebble write stall ended", "stalled", stall.end())
			},
		},
		// A volatile store's writes need no log: it is never reopened after
		// a crash (see Options.Volatile), and Checkpoint and Close flush the
		// memtable to sstables before they copy or leave the directory.
		DisableWAL: o.Volatile,
		Comparer:   &wholeKeyComparer,
		// L0 is compacted from 8 files, not 4: the base level is rewritten
		// half as often, and L0's extra files cost a read little, since
		// prefix seeks and gets skip them by their bloom filters. Writes
		// stop at 32 files, not 12, so a burst waits less on compactions.
		L0CompactionThreshold: 8,
		L0StopWritesThreshold: 32,
		FileCache:             sharedFileCache(),
	}
	// Values of at least Options.ValueSeparationBytes live in blob files
	// that compactions do not rewrite: a keyed operator rewrites its whole
	// value on every update, and with kilobyte values (q6* keeps 2 KB per
	// seller) compactions rewriting them again were ~45 % of the stateful
	// worker's CPU and ~200 MB/s of disk writes for ~55 MB/s of updates
	// (EXPERIMENTS.md, "Overload"). Blob files whose values are mostly
	// overwritten are rewritten once they are old enough, bounding the disk
	// they hold (q6* over 470 MB of state: ~1 GB on disk while updated at
	// 35 K values/s). Sstable target sizes double per level from 2 MiB, as
	// Pebble v2 does by default: fewer, larger files in the deep levels keep
	// the table cache from reopening sstables on state of gigabytes.
	opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{
			Enabled:               o.valueSeparationMin() > 0,
			MinimumSize:           max(o.valueSeparationMin(), 1),
			MaxBlobReferenceDepth: depth.get(),
			RewriteMinimumAge:     30 * time.Second,
			TargetGarbageRatio:    0.5,
		}
	}
	for i := range opts.Levels {
		// Bloom filters make gets of absent keys (first sight of a key, very
		// common in stateful operators) skip sstables, and prefix seeks
		// (multiGetPrefix) skip the sstables of other levels.
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	if o.tune != nil {
		o.tune(opts)
	}
	db, err := pebble.Open(o.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("statesvc: open pebble in %s: %w", o.Dir, err)
	}
	p := &Pebble{db: db, cache: newValueCache(ValueCacheLimit(o.CacheBytes)), volatile: o.Volatile, depth: depth}
	p.cond.L = &p.mu
	empty, err := p.isEmpty()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	if empty {
		p.written = newKeyFilter()
	}
	return p, nil
}

func (p *Pebble) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.active++
	return nil
}

func (p *Pebble) exit() {
	p.mu.Lock()
	p.active--
	if p.active == 0 && p.closed {
		p.cond.Broadcast()
	}
	p.mu.Unlock()
}

// pebbleIterMultiGetMin is the batch size from which MultiGet sorts the keys
// and walks one iterator instead of doing point gets. Measured with
// BenchmarkPebbleMultiGetVariants (1000 keys, half absent): the iterator is
// 10-25% faster on sstables, on par in the memtable, and allocates ~50x less;
// a single key is cheaper as a point get. The iterator seeks by prefix
// (multiGetPrefix): on sstables 25 % faster than plain seeks (bloom filters
// skip files), and 10 % faster on state 33 times the block cache
// (BenchmarkPebbleLargeStateGet); 14 % slower in the memtable, where the
// value cache answers most reads.
const pebbleIterMultiGetMin = 4

// valueCacheMultiple sizes the value cache at CacheBytes*valueCacheMultiple,
// at most maxValueCacheBytes (on top of the block cache): 512 MB by
// default, room for q6*'s 200 K sellers of 2 KB, or maxValueCacheEntries
// small ones. A working set that did not fit sent a large share of reads
// to memtable seeks, the keyed counter's main cost with 100 K keys per
// task at 1/8. Kilobyte values that did not fit were worse: a value
// rewritten on every update is read back from the blob file its last
// flush wrote, a block no read has brought into the block cache yet, so
// nearly every read was a pread however large the block cache (q6* with a
// 32 MB value cache: 52 % of the one task's worker in Pebble.MultiGet,
// with a 256 or a 512 MB block cache alike; with 512 MB of values the one
// task sustained 122 K events/s instead of 47 K). So the value cache is
// what grows, not the block cache: a 512 MB block cache (the artifact's)
// helped q6* not at all. With write-back (Volatile), a working set within
// the dirty budget (dirtyBudget) is written to Pebble only when something
// reads Pebble directly.
const valueCacheMultiple = 2

// maxValueCacheBytes caps the value cache where the block cache is larger
// than the default: beyond a task's hot keys the value cache only adds
// copies and evictions (it switches itself off at low hit rates), while
// the block cache keeps the index and filter blocks every read needs.
const maxValueCacheBytes = 512 << 20

// ValueCacheLimit is the capacity of the value cache of a Pebble store
// opened with a block cache of cacheBytes (Options.CacheBytes, after
// defaults), so that a benchmark can size a state to lie beyond it.
func ValueCacheLimit(cacheBytes int64) int64 {
	return min(cacheBytes*valueCacheMultiple, maxValueCacheBytes)
}

// wholeKeyComparer is Pebble's default ordering, under its name (stores
// written before stay readable), with Split saying that a key is its own
// prefix: the bloom filters hash whole keys either way, and with Split
// set an iterator's SeekPrefixGE can consult them.
var wholeKeyComparer = func() pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Split = func(k []byte) int { return len(k) }
	return c
}()

// MultiGet implements Store. Keys the value cache knows skip Pebble.
func (p *Pebble) MultiGet(keys [][]byte) ([][]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.exit()
	out := make([][]byte, len(keys))
	miss, gen, on := p.cache.lookup(keys, out)
	if !on { // cache off (and so nothing dirty): straight to Pebble
		return p.readPebble(keys)
	}
	if len(miss) == 0 {
		return out, nil
	}
	mk := keys
	if len(miss) < len(keys) {
		mk = make([][]byte, len(miss))
		for j, i := range miss {
			mk[j] = keys[i]
		}
	}
	read, err := p.readPebble(mk)
	if err != nil {
		return nil, err
	}
	p.cache.fill(gen, mk, read, miss)
	if len(miss) == len(keys) {
		return read, nil
	}
	for j, i := range miss {
		out[i] = read[j]
	}
	return out, nil
}

// isEmpty says whether the store holds no key at all (deleted ones aside).
func (p *Pebble) isEmpty() (bool, error) {
	it, err := p.db.NewIter(nil)
	if err != nil {
		return false, fmt.Errorf("statesvc: pebble: new iterator: %w", err)
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("statesvc: pebble: look for a first key: %w", err)
	}
	return empty, nil
}

// readPebble reads keys from Pebble, except those the key filter knows
// were never written (absent without a seek).
func (p *Pebble) readPebble(keys [][]byte) ([][]byte, error) {
	if p.written == nil {
		return p.readPebbleAll(keys)
	}
	var maybe [][]byte
	var at []int
	for i, k := range keys {
		if p.written.mayContain(k) {
			maybe = append(maybe, k)
			at = append(at, i)
		}
	}
	switch len(maybe) {
	case len(keys):
		return p.readPebbleAll(keys)
	case 0:
		return make([][]byte, len(keys)), nil
	}
	read, err := p.readPebbleAll(maybe)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for j, i := range at {
		out[i] = read[j]
	}
	return out, nil
}

func (p *Pebble) readPebbleAll(keys [][]byte) ([][]byte, error) {
	if len(keys) < pebbleIterMultiGetMin {
		return p.multiGetPoint(keys)
	}
	return p.multiGetPrefix(keys)
}

// maxCollectorPrealloc bounds valueCollector's first allocation.
const maxCollectorPrealloc = 16 << 20

// valueCollector gathers values into one buffer and slices it at the end, so
// a batch of values costs two allocations however many keys it has.
type valueCollector struct {
	buf  []byte
	ends []int // end offset in buf per key; -1 = absent
}

func (c *valueCollector) add(v []byte, ok bool) {
	if !ok {
		c.ends = append(c.ends, -1)
		return
	}
	if c.buf == nil {
		// Values of one state are mostly of one size: room for the rest of
		// the batch at this one's size saves the doublings (and their
		// copies) of a buffer grown from nothing, a few percent of a batch
		// over kilobyte values.
		c.buf = make([]byte, 0, min(len(v)*(cap(c.ends)-len(c.ends)), maxCollectorPrealloc))
	}
	c.buf = append(c.buf, v...)
	c.ends = append(c.ends, len(c.buf))
}

func (c *valueCollector) finish(out [][]byte, order []int) [][]byte {
	if c.buf == nil {
		c.buf = []byte{} // empty values must come back non-nil
	}
	start := 0
	for j, end := range c.ends {
		if end < 0 {
			continue
		}
		i := j
		if order != nil {
			i = order[j]
		}
		out[i] = c.buf[start:end:end]
		start = end
	}
	return out
}

// multiGetPoint does one db.Get per key.
func (p *Pebble) multiGetPoint(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	c := valueCollector{ends: make([]int, 0, len(keys))}
	for _, k := range keys {
		v, closer, err := p.db.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			c.add(nil, false)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("statesvc: pebble get %q: %w", k, err)
		}
		c.add(v, true)
		if err := closer.Close(); err != nil {
			return nil, fmt.Errorf("statesvc: pebble get %q: close: %w", k, err)
		}
	}
	return c.finish(out, nil), nil
}

// multiGetIter sorts the keys and walks one iterator with ascending seeks
// (Pebble turns monotonic SeekGE into cheap Nexts where it can).
func (p *Pebble) multiGetIter(keys [][]byte) ([][]byte, error) {
	return p.multiGetSorted(keys, false)
}

// multiGetPrefix is multiGetIter with prefix seeks: every key is its own
// prefix (wholeKeyComparer's Split), so each seek consults the bloom
// filters and skips the sstables that lack the key instead of reading an
// index and a data block of every level.
func (p *Pebble) multiGetPrefix(keys [][]byte) ([][]byte, error) {
	return p.multiGetSorted(keys, true)
}

func (p *Pebble) multiGetSorted(keys [][]byte, prefix bool) ([][]byte, error) {
	out := make([][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	var opts *pebble.IterOptions
	if !prefix {
		opts = &pebble.IterOptions{
			LowerBound: keys[order[0]],
			UpperBound: append(slices.Clip(keys[order[len(order)-1]]), 0),
		}
	}
	it, err := p.db.NewIter(opts)
	if err != nil {
		return nil, fmt.Errorf("statesvc: pebble multiget: new iterator: %w", err)
	}
	c := valueCollector{ends: make([]int, 0, len(keys))}
	for _, i := range order {
		k := keys[i]
		var found bool
		if prefix {
			found = it.SeekPrefixGE(k)
		} else {
			found = it.SeekGE(k)
		}
		if found && bytes.Equal(it.Key(), k) {
			v, err := it.ValueAndErr()
			if err != nil {
				_ = it.Close()
				return nil, fmt.Errorf("statesvc: pebble multiget %q: %w", k, err)
			}
			c.add(v, true)
		} else {
			c.add(nil, false)
		}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("statesvc: pebble multiget: close iterator: %w", err)
	}
	return c.finish(out, order), nil
}

// MultiPut implements Store. A volatile store buffers the writes in the
// value cache (write-back); otherwise they are committed as one batch with
// NoSync.
func (p *Pebble) MultiPut(kvs []KV) error { return p.PutOwned(kvs, nil) }

// PutOwned is MultiPut where owned[i] (owned nil: none) says that the
// caller gives kvs[i].Value up: the value cache may keep that buffer
// instead of a copy, so the caller must not modify it afterwards, nor
// pass a slice of a larger buffer it does not want kept alive (a record's
// value, a slice of a message).
func (p *Pebble) PutOwned(kvs []KV, owned []bool) error {
	if owned != nil && len(owned) != len(kvs) {
		return fmt.Errorf("statesvc: pebble: %d ownership marks for %d writes", len(owned), len(kvs))
	}
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.volatile {
		p.cache.buffer(kvs, owned)
		return p.writeBackLocked(false)
	}
	p.cache.beginWrite()
	if err := p.commitLocked(kvs, nil, "writes"); err != nil {
		return err
	}
	p.cache.wrote(kvs, owned)
	return nil
}

// commitLocked writes kvs, except those skip marks, to Pebble as one batch
// with NoSync (what names them in an error). A failed commit resets the
// value cache: what it holds may no longer match Pebble. The caller holds
// wmu.
func (p *Pebble) commitLocked(kvs []KV, skip []bool, what string) error {
	size := 0
	for i, kv := range kvs {
		if skip == nil || !skip[i] {
			size += len(kv.Key) + len(kv.Value) + batchEntryOverhead
		}
	}
	b := p.db.NewBatchWithSize(size)
	defer b.Close()
	if err := p.batchSorted(b, kvs, skip); err != nil {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		p.cache.reset()
		return fmt.Errorf("statesvc: pebble commit batch of %d %s: %w", len(kvs), what, err)
	}
	return nil
}

// batchSorted adds kvs, except those skip marks, to b in key order (nil
// values as deletes), each written key to the key filter first.
func (p *Pebble) batchSorted(b *pebble.Batch, kvs []KV, skip []bool) error {
	for _, i := range sortedOrder(kvs) {
		kv := kvs[i]
		if skip != nil && skip[i] {
			continue
		}
		var err error
		if kv.Value == nil {
			err = b.Delete(kv.Key, nil)
		} else {
			if p.written != nil {
				p.written.add(kv.Key)
			}
			err = b.Set(kv.Key, kv.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("statesvc: pebble batch write %q: %w", kv.Key, err)
		}
	}
	return nil
}

// sortedOrder returns the indices of kvs in key order, equal keys in
// their order in kvs (the later write wins in the batch, as unsorted).
// A batch applies its writes to the memtable skiplist in its order, and
// in key order each insert starts its search from the previous one's
// position instead of the top of the list: random keys' inserts were the
// largest cost of the keyed counter over 10 M keys.
//
// An unstable sort of (key, index) pairs, ties broken by index: a stable
// sort of indices (insertion merges, O(n log² n), each comparison reaching
// into kvs) was 16 % of the keyed counter's CPU once write-backs took
// runs of tens of thousands of keys.
func sortedOrder(kvs []KV) []int {
	type ki struct {
		k []byte
		i int
	}
	s := make([]ki, len(kvs))
	for i, kv := range kvs {
		s[i] = ki{kv.Key, i}
	}
	slices.SortFunc(s, func(a, b ki) int {
		if c := bytes.Compare(a.k, b.k); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	order := make([]int, len(kvs))
	for j, e := range s {
		order[j] = e.i
	}
	return order
}

// writeBackChunk is how many dirty entries one write-back batch takes when
// the dirty budget is exceeded: small enough that no single MultiPut pays
// for a large backlog, so batch latency stays even.
const writeBackChunk = 1024

// batchEntryOverhead is a Pebble batch entry's bytes besides its key and
// value: a kind byte and two varint lengths.
const batchEntryOverhead = 1 + 2*binary.MaxVarintLen32

// writeBackLocked writes dirty cache entries to Pebble, oldest first: all
// of them with all, else chunks until they are back within their budget.
// The caller holds wmu.
func (p *Pebble) writeBackLocked(all bool) error {
	for all || p.cache.overBudget() {
		n := p.cache.writeBackRun()
		if all {
			n = -1
		}
		// The entries in key order (see sortedOrder). Their values stay
		// valid after oldestDirty returns: only a writer changes them,
		// and this one holds wmu.
		var dirty []KV
		var keys []byte // the keys' bytes, one buffer
		size := 0
		taken, err := p.cache.oldestDirty(n, func(k string, v []byte, present bool) error {
			s := len(keys)
			keys = append(keys, k...)
			kv := KV{Key: keys[s:len(keys):len(keys)]}
			if present {
				kv.Value = v[:len(v):len(v)]
				if kv.Value == nil {
					kv.Value = []byte{}
				}
			}
			dirty = append(dirty, kv)
			size += len(k) + len(v) + batchEntryOverhead
			return nil
		})
		if err == nil && taken > 0 {
			err = p.commitSorted(dirty, size)
		}
		if err != nil {
			return fmt.Errorf("statesvc: pebble write back %d cached writes: %w", taken, err)
		}
		p.cache.markWritten(taken)
		if all || taken == 0 {
			return nil
		}
	}
	return nil
}

// commitSorted writes kvs (nil values delete) in key order as one batch of
// size bytes. Sized up front: a batch grown by doubling copied a chunk of
// 2 KB values about twice over (memmove and memclr were 14 % of a worker's
// CPU after a scale-out of q6*).
func (p *Pebble) commitSorted(kvs []KV, size int) error {
	b := p.db.NewBatchWithSize(size)
	err := p.batchSorted(b, kvs, nil)
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	_ = b.Close()
	return err
}

// Scan implements Store. It reads a consistent snapshot taken at its start.
// fn may call the store's other methods (not Close).
func (p *Pebble) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return nil
	}
	// The range's buffered writes first; the iterator's view is fixed when
	// it is created, so wmu need not be held while fn (which may write) runs.
	p.wmu.Lock()
	err := p.writeBackRangeLocked(start, end)
	var it *pebble.Iterator
	if err == nil {
		it, err = p.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	}
	p.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("statesvc: pebble scan: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("statesvc: pebble scan at %q: %w", it.Key(), err)
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("statesvc: pebble scan: %w", err)
	}
	return nil
}

// Export calls fn once for every live key in [start, end), in no
// particular order, without first writing the buffered writes of a
// write-back cache to Pebble: it hands out those of the range itself and
// skips their older versions in Pebble. A task that hands a range of its
// state away and then deletes it (a bulk state move) so never writes the
// range's buffered values to Pebble, nor the rest of its buffered writes
// early, nor sorts them. fn's slices are valid only during the call; fn
// must not write the store.
func (p *Pebble) Export(start, end []byte, fn func(k, v []byte) bool) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	_, _, err := p.exportRange(start, end, 0, false, func(chunk []byte) error {
		if all, err := eachPacked(chunk, fn); err != nil || !all {
			return cmp.Or(err, errStopped)
		}
		return nil
	}, func(k, v []byte) error {
		if !fn(k, v) {
			return errStopped
		}
		return nil
	})
	if errors.Is(err, errStopped) {
		return nil
	}
	return err
}

// errStopped is how a callback of exportRange stops it.
var errStopped = errors.New("statesvc: stopped by the caller")

// exportRange hands every live key of [start, end) out: the range's
// buffered writes to onChunk, packed in chunks of at most limit bytes (0:
// one), copied under wmu with an iterator made at the same moment; then
// Pebble's keys they do not supersede to onKey. The set of superseded keys
// is built only when Pebble holds any of the range. With keepKeys it also
// returns Pebble's keys of the range that the cache may hold outside the
// shards d.whole lists (MoveOut drops their cache entries).
// A callback's error (errStopped to stop) ends it and is returned. The
// caller holds enter.
func (p *Pebble) exportRange(start, end []byte, limit int, keepKeys bool, onChunk func([]byte) error, onKey func(k, v []byte) error) (d dirtyRange, onDisk [][]byte, err error) {
	if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
		return d, nil, nil
	}
	p.wmu.Lock()
	d = p.cache.dirtyInRange(start, end, limit)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	p.wmu.Unlock()
	if err != nil {
		return d, nil, fmt.Errorf("statesvc: pebble export: %w", err)
	}
	defer it.Close()
	for _, c := range d.chunks {
		if err := onChunk(c); err != nil {
			return d, nil, err
		}
	}
	if !it.First() {
		if err := it.Error(); err != nil {
			return d, nil, fmt.Errorf("statesvc: pebble export: %w", err)
		}
		return d, nil, nil
	}
	newer := map[string]struct{}{}
	d.keys(func(k []byte) { newer[string(k)] = struct{}{} })
	var arena []byte
	for ok := true; ok; ok = it.Next() {
		k := it.Key()
		// Only keys the cache may hold need listing: a bulk move's
		// buckets are whole shards, dropped at once, and listing their
		// keys was a tenth of its old owner's CPU on borg's 6.3 M keys.
		if keepKeys && d.mayCache(k) {
			s := len(arena)
			arena = append(arena, k...)
			onDisk = append(onDisk, arena[s:len(arena):len(arena)])
		}
		if _, skip := newer[string(k)]; skip {
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return d, onDisk, fmt.Errorf("statesvc: pebble export at %q: %w", k, err)
		}
		if err := onKey(k, v); err != nil {
			return d, onDisk, err
		}
	}
	if err := it.Error(); err != nil {
		return d, onDisk, fmt.Errorf("statesvc: pebble export: %w", err)
	}
	return d, onDisk, nil
}

// DeleteRange implements Store with one range tombstone.
func (p *Pebble) DeleteRange(start, end []byte) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	// The range's cached values go, buffered writes included (the range
	// tombstone supersedes them); the rest of the cache stays.
	p.cache.dropRange(start, end)
	if start == nil {
		start = []byte{}
	}
	if end == nil {
		// No finite key bounds the key space: end just past the last key.
		it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: start})
		if err != nil {
			return fmt.Errorf("statesvc: pebble delete range: new iterator: %w", err)
		}
		if it.Last() {
			end = append(slices.Clone(it.Key()), 0)
		}
		if err := it.Close(); err != nil {
			return fmt.Errorf("statesvc: pebble delete range: find last key: %w", err)
		}
		if end == nil {
			return nil // nothing at or after start
		}
	}
	if bytes.Compare(start, end) >= 0 {
		return nil
	}
	b := p.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(start, end, nil); err != nil {
		return fmt.Errorf("statesvc: pebble delete range [%q, %q): %w", start, end, err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("statesvc: pebble delete range [%q, %q): commit: %w", start, end, err)
	}
	return nil
}

// ApproxSize implements Store: sstable bytes (compressed, may still count
// data shadowed by not-yet-compacted deletes) plus memtable bytes plus the
// cached writes not yet written back (entry overhead included).
func (p *Pebble) ApproxSize() uint64 {
	if p.enter() != nil {
		return 0
	}
	defer p.exit()
	m := p.db.Metrics()
	total := m.MemTable.Size + uint64(p.cache.bufferedBytes())
	for _, l := range m.Levels {
		total += uint64(l.TablesSize)
	}
	total += m.BlobFiles.Local.LiveSize
	return total
}

// Flush writes the buffered writes and the memtable to sstables (tests,
// checkpoints).
func (p *Pebble) Flush() error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.flushLocked()
}

// flushLocked writes the buffered writes and the memtable to sstables.
func (p *Pebble) flushLocked() error {
	if err := p.writeBackLocked(true); err != nil {
		return err
	}
	if err := p.db.Flush(); err != nil {
		return fmt.Errorf("statesvc: pebble flush: %w", err)
	}
	return nil
}

// Close implements Store: waits for running calls, then closes the DB.
func (p *Pebble) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for p.active > 0 {
		p.cond.Wait()
	}
	p.mu.Unlock()
	// Without a WAL, whatever is not in an sstable would be lost: flush so
	// that a reopened store finds every write (a WAL's store replays it).
	var err error
	if p.volatile {
		p.wmu.Lock()
		err = p.flushLocked()
		p.wmu.Unlock()
	}
	if cerr := p.db.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		return fmt.Errorf("statesvc: close pebble: %w", err)
	}
	return nil
}

// slogLogger adapts slog to pebble.Logger: routine messages at debug level,
// so Pebble stays quiet unless asked.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Infof(format string, args ...any) {
	if s.l.Enabled(context.Background(), slog.LevelDebug) {
		s.l.Debug(fmt.Sprintf(format, args...))
	}
}

func (s slogLogger) Errorf(format string, args ...any) {
	s.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (s slogLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.l.Error("pebble fatal", "msg", msg)
	panic("pebble: " + msg)
}

// blobReferenceDepth is how many blob files a compaction's output may
// reference per key range before the compaction rewrites their values into
// new ones. Pebble's 10 suits range scans; keyed state is read by key, and
// with keys spread uniformly every flush's blob file overlaps every table,
// so at 10 nearly every compaction rewrote the values it met again: on q6*
// over 2.2 GB, 11-13 % of the stateful worker's CPU went to those rewrites.
// At 100 they are rarer (a store just loaded from a snapshot built by many
// flushes still rewrites its values once: EXPERIMENTS.md, "q6* over 2.2 GB";
// a warm-up snapshot is compacted whole first, pebble_compact.go)
// and still bound the number of blob files (values land in new files, and
// old files empty out) where an unbounded depth let one flush's file live
// on per flush, past the file cache.
// Measured (2026-12-04, koala bench q6-1task run for 240 s instead of 40,
// one run each): depth 10 17.1 K closed auctions per worker CPU-s, 25.5 K/s
// at the sink against 27 K offered, 4.5-5.3 GB on disk; depth 100 (with
// a file cache of 5000) 22.5 K, 27.0 K/s sustained, 4.5-5.1 GB and 1.6-2.1 K blob
// files. BenchmarkPebbleLargeStateChurn: 34 against 42 µs of CPU per key
// rewritten (with Pebble's 10 and 1000 open files); the price is locality:
// a key range's values sit in more blob files, and a full scan (a bucket
// handoff) took 3.1 against 2.3 µs per key in the same run.
const blobReferenceDepth = 100
