package statesvc

import (
	"sync"
	"unsafe"
)

// valueCache is a bounded cache of values in front of Pebble. A stateful
// operator reads and writes the same hot keys batch after batch; in Pebble
// each read is a seek through the memtable skiplist (where every update
// left a version) and the sstables, which profiling of the keyed counter
// showed as half of its CPU. The cache answers those reads from a map. It
// also remembers keys known to be absent.
//
// Write-through or write-back: a write-through cache (the default) applies
// each MultiPut to Pebble and then to the cache. A write-back cache (Pebble
// opened with Options.Volatile) keeps written values as dirty entries and
// writes them to Pebble later, oldest first, once the dirty entries pass
// their budget, those of a range before a Scan of it, and all of them
// before Checkpoint and Close (DeleteRange drops those of its range). A
// key updated several times while dirty reaches Pebble once: after
// profiling, inserting every update into
// the memtable skiplist was the keyed counter's largest cost. Dirty entries
// are never evicted or dropped, so every read sees the newest value: from
// the cache when the key is dirty, else from Pebble.
//
// Coherence: writes bump gen before and after they change the cache or
// Pebble; a MultiGet fills in what it read from Pebble only if gen did not
// move meanwhile, so a read that raced with a write never installs the
// older value.
//
// Cached values are immutable: a write gives its entry a new buffer (the
// writer's own, when it gives the value up: PutOwned) and never writes
// into the old one, so a lookup hands out the cached slice itself, capped,
// and a reader keeps it valid for as long as it likes. After profiling
// q6* (2 KB per seller), copying values out of the cache and into it
// was a third of a task's worker.
//
// A working set much larger than the cache makes clean entries pure
// overhead (copies and evictions for few hits), so the cache switches
// itself off when it is full (evicting) and fewer than a quarter of a
// window's lookups hit, and tries again after a while; a cold cache that is
// still filling stays on. Off, it keeps no clean entry and fills nothing,
// but a write-back cache still buffers writes: its entries are then all
// dirty, a write-back drops what it wrote, and it writes all of them
// (writeBackRun, offDirtyBytes). With 10 M keys nearly every write is a new key, and a
// batch's few hundred keys, sorted, lie so far apart in the memtable
// skiplist that each insert searched it from near the top (28 % of the
// keyed counter's CPU); a run of tens of thousands lands a few entries
// apart. Every write bumps gen whether the cache is on or not, so a fill
// never installs a value older than a write it did not see.
type valueCache struct {
	mu    sync.Mutex
	m     cacheShards // by pointer: a rewrite of a known key updates in place
	bytes int64
	limit int64
	// minCharge is the least an entry counts against limit (charge).
	minCharge int64
	gen       uint64
	off       bool // no clean entries: lookups see only dirty ones
	lookups   int  // in the current window
	hits      int
	bypassed  int // keys looked up while off

	// totalLookups and totalHits count since the cache was made (keys
	// looked up while off are lookups without a hit), so a benchmark can
	// show how much of a window's reads the cache answered (CacheStats).
	totalLookups, totalHits uint64

	// dirty lists the dirty entries, oldest first, from dirtyHead on.
	dirty      []*cachedValue
	dirtyHead  int
	dirtyBytes int64
	// dirtyCharge is what the dirty entries count against limit
	// (charge): evictLocked weighs it against bytes, in the same unit,
	// to know what clean entries it can free.
	dirtyCharge int64

	// clean queues the entries eviction may take, oldest first, from
	// cleanHead on: every clean entry of the map is queued (once, with
	// queued set), and an entry dirtied or dropped since stays queued
	// until eviction or a compaction passes it (cleanGone counts the
	// dropped ones). Eviction used to walk the map past dirty entries to
	// find clean ones: with borg's small values charged minCharge each,
	// the dirty entries alone passed the limit, every fill evicted all the
	// clean ones it had just added, and each walked nearly the whole map
	// (870 K entries) to find them. After profiling, that walk was 64 % of
	// the old owner's worker after a scale-out.
	clean     []*cachedValue
	cleanHead int
	cleanGone int

	// recent lists the entries of the last lookup's keys (filled in by
	// fill), in key order. A stateful operator writes back the keys it
	// just read, the same slices in the same order, so buffer and wrote
	// find their entries here instead of hashing and comparing each key
	// in the map a second time (after profiling, a fifth of the keyed
	// counter's map cost). Entries are matched by the key's address and
	// length and checked by content, so a different caller's keys, or a
	// caller that reused a key buffer, simply take the map path.
	recent []recentEntry
}

// recentEntry is one key of the last lookup: its bytes' address and
// length, and its entry (nil when it was a miss not filled since).
type recentEntry struct {
	key *byte
	n   int
	e   *cachedValue
}

// recentLookahead is how many recent entries past the last match a write
// looks at: written keys are the looked-up ones in order, minus those the
// operator did not change, plus keys taken from other tasks (not looked
// up here).
const recentLookahead = 4

const (
	cacheWindow      = 1 << 14 // lookups per hit-rate decision
	cacheRetryAfter  = 1 << 22 // keys bypassed before trying again
	cacheMinHitShare = 4       // off below 1/4 hits
)

// dirtyBudget bounds the dirty entries of a write-back cache at 3/4 of its
// limit, so some room is left for clean entries to come and go, and at
// maxDirtyBytes. The larger
// the budget the more updates of a key meet in the cache before it is
// written: with the keyed counter's 100 K uniform keys per task, a budget
// short of the working set still wrote every key every other update.
//
// Off, the budget is at most offDirtyBytes, and a write-back takes all
// of them: every entry is dirty then and most are written once, so a
// smaller map costs less per lookup and insert (after profiling, probing
// a map of 200 K entries ate what the longer runs saved), and a map emptied
// at once costs no delete per key.
func (c *valueCache) dirtyBudget() int64 {
	if c.off {
		return min(c.limit/4*3, offDirtyBytes)
	}
	return min(c.limit/4*3, maxDirtyBytes)
}

// offDirtyBytes is the dirty budget of a cache that is off: with the keyed
// counter's 8-byte values about 30 K entries per write-back, enough that
// a sorted run's keys land a few entries apart in the memtable skiplist.
// Chosen with BenchmarkPebbleCounterManyKeys; a variable for it.
var offDirtyBytes int64 = 4 << 20

// maxDirtyBytes caps the dirty budget of a large cache. The budget
// decides how much of a working set's rewrites meet in the cache: q6*
// rewrites its sellers' 2 KB values, and with 24 MiB (what the 32 MB cache
// had) over 200 K uniform sellers (430 MB) nearly every update reached
// Pebble, its flushes and its blob files: the one task stalled on full
// memtables and sustained 20.3 K events/s; with 384 MiB it sustained 41.3 K
// (EXPERIMENTS.md, "Dirty budget"). The cost is paid by whatever writes
// everything back: Checkpoint and Close (a Scan writes back only its
// range, and the handoffs and bulk moves read dirty entries from the
// cache). A checkpoint of a full budget took 3.2 s on a 230 MB/s disk
// (BenchmarkPebbleVolatileCheckpointFullBudget, 364 MB dirty), so a job
// with periodic checkpoints pays that per checkpoint, where 24 MiB wrote
// a fifteenth of those bytes. Memory is bounded by the cache's limit
// either way.
const maxDirtyBytes = 384 << 20

type cachedValue struct {
	key     string // the map key (shared, not a copy)
	v       []byte
	present bool
	dirty   bool
	gone    bool // evicted: no longer in the map (a stale recent entry)
	queued  bool // in the clean queue
}

// cacheEntryOverhead approximates the map entry, entry struct and string
// header cost.
const cacheEntryOverhead = 96

func newValueCache(limit int64) *valueCache {
	return &valueCache{limit: limit, minCharge: limit / maxValueCacheEntries}
}

func (e *cachedValue) size() int64 { return int64(len(e.key) + cap(e.v) + cacheEntryOverhead) }

// shared is e's value as a reader gets it: the cached slice, capped so that
// a reader's append cannot write into the buffer past it (a moved entry's
// value is a slice of its chunk).
func (e *cachedValue) shared() []byte { return e.v[:len(e.v):len(e.v)] }

// charge is what e counts against the cache's limit: its size, but at
// least minCharge, so a cache sized for kilobyte values holds no more
// entries than maxValueCacheEntries. Dirty entries count their size
// against the dirty budget.
func (c *valueCache) charge(e *cachedValue) int64 { return max(e.size(), c.minCharge) }

// maxValueCacheEntries bounds the entries of a large cache. The cost of a
// clean entry is per entry (a map slot, a pointer for the collector, a
// copy on fill), and a cache of small values too many to fit pays it on
// every miss until it is full enough to judge its hit rate: with 512 MB of
// 8-byte counts (4 M entries), the counter over 10 M keys ran 11 % slower
// per core (154 K against 174 K events per CPU-s, koala bench, one run
// each, same hour) than with the 32 MB cache before, which filled at about
// as many entries as this.
const maxValueCacheEntries = 256 << 10

// maxEvictStep is the most one eviction frees (evictLocked).
const maxEvictStep = 8 << 20

// lookup resolves what it can into out (out[i] for a hit: the cached
// value, shared and not to be modified; nil when the key is cached as
// absent) and returns the
// indices of keys it does not know plus the generation to pass to fill.
// ok is false when the cache is off (every key is a miss; out untouched).
func (c *valueCache) lookup(keys, out [][]byte) (miss []int, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.totalLookups += uint64(len(keys))
	off := c.off
	if off {
		if c.bypassed += len(keys); c.bypassed >= cacheRetryAfter {
			c.off, c.bypassed = false, 0
		}
		if c.dirtyLen() == 0 {
			return nil, c.gen, false
		}
	}
	clear(c.recent)
	c.recent = c.recent[:0]
	for i, k := range keys {
		e := c.m.get(k)
		c.recent = append(c.recent, recentEntry{key: unsafe.SliceData(k), n: len(k), e: e})
		if e == nil {
			miss = append(miss, i)
			continue
		}
		c.totalHits++
		if !off {
			c.hits++
		}
		if e.present {
			out[i] = e.shared()
		}
	}
	if off {
		return miss, c.gen, true
	}
	if c.lookups += len(keys); c.lookups >= cacheWindow {
		if c.hits*cacheMinHitShare < c.lookups && c.bytes >= c.limit/2 {
			c.switchOffLocked()
		}
		c.lookups, c.hits = 0, 0
	}
	return miss, c.gen, true
}

// switchOffLocked drops the clean entries and stops caching any; the
// dirty ones stay until written back.
func (c *valueCache) switchOffLocked() {
	c.off = true
	c.gen++
	c.clearCleanLocked() // no clean entry stays
	if c.dirtyLen() == 0 {
		c.m.each(func(_ string, e *cachedValue) bool {
			e.gone = true // a recent entry still pointing at it must not be used
			return true
		})
		c.m.clear()
		c.bytes = 0
	} else {
		for _, m := range c.m.s {
			for k, e := range m {
				if !e.dirty {
					delete(m, k)
					c.m.n--
					e.gone = true
					c.bytes -= c.charge(e)
				}
			}
		}
	}
	c.forgetRecentLocked()
}

func (c *valueCache) forgetRecentLocked() {
	clear(c.recent)
	c.recent = c.recent[:0]
}

// recentLocked returns k's entry if it is among the recent entries from
// *next on (within recentLookahead) and still cached, advancing *next past
// it; else nil.
func (c *valueCache) recentLocked(k []byte, next *int) *cachedValue {
	p := unsafe.SliceData(k)
	end := min(*next+recentLookahead, len(c.recent))
	for i := *next; i < end; i++ {
		r := &c.recent[i]
		if r.key != p || r.n != len(k) {
			continue
		}
		if r.e == nil || r.e.gone || r.e.key != string(k) {
			return nil
		}
		*next = i + 1
		return r.e
	}
	return nil
}

// entryLocked returns k's entry, adding an empty one when k is unknown.
func (c *valueCache) entryLocked(k []byte) *cachedValue {
	if e := c.m.get(k); e != nil {
		return e
	}
	return c.addLocked(string(k))
}

// addLocked adds an empty entry for s, counted in bytes as setEntryLocked
// expects.
func (c *valueCache) addLocked(s string) *cachedValue {
	e := &cachedValue{key: s}
	c.m.add(s, e)
	c.bytes += c.charge(e)
	return e
}

// setBatchLocked caches a batch of writes, finding their entries among
// the recent ones where it can. owned (nil: none) marks the values the
// writer gave up (PutOwned), which are kept instead of copied.
func (c *valueCache) setBatchLocked(kvs []KV, owned []bool, dirty bool) {
	next := 0
	for i, kv := range kvs {
		e := c.recentLocked(kv.Key, &next)
		if e == nil {
			e = c.entryLocked(kv.Key)
		}
		c.setEntryLocked(e, kv.Value, dirty, owned != nil && owned[i])
	}
	c.forgetRecentLocked() // used once: the next batch looks up again
}

// fill caches values read from Pebble at generation gen (nil = absent).
// keys[j] was key miss[j] of the lookup (miss nil: the lookup's keys).
func (c *valueCache) fill(gen uint64, keys, vals [][]byte, miss []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.off {
		return // a write ran meanwhile (what was read may be older), or off
	}
	if c.dirtyCharge >= c.limit {
		// No clean entry can stay: eviction would take back at once
		// what this copied in.
		return
	}
	for j, k := range keys {
		if c.m.get(k) != nil {
			continue // filled by a concurrent reader, as new as this
		}
		e := c.addLocked(string(k))
		// vals share one buffer per read (valueCollector): copied, so
		// an entry holds only its own bytes.
		c.setEntryLocked(e, vals[j], false, false)
		i := j
		if miss != nil {
			i = miss[j]
		}
		// The recent entries may be another lookup's by now: note e only
		// where this key was looked up.
		if i < len(c.recent) && c.recent[i].key == unsafe.SliceData(k) && c.recent[i].n == len(k) {
			c.recent[i].e = e
		}
	}
	c.evictLocked()
}

// beginWrite invalidates in-flight fills before a write.
func (c *valueCache) beginWrite() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// wrote records a batch committed to Pebble (owned as for setBatchLocked).
func (c *valueCache) wrote(kvs []KV, owned []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.off {
		return
	}
	c.setBatchLocked(kvs, owned, false)
	c.evictLocked()
}

// buffer records a batch as dirty entries, not yet in Pebble, on or off
// (off, they are the only entries), owned as for setBatchLocked. The
// caller (the single writer) then writes the oldest dirty entries while
// overBudget.
func (c *valueCache) buffer(kvs []KV, owned []bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.setBatchLocked(kvs, owned, true)
	c.evictLocked()
}

// overBudget says whether the dirty entries exceed their share of the
// cache.
func (c *valueCache) overBudget() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirtyBytes > c.dirtyBudget()
}

// writeBackRun is how many of the oldest dirty entries one write-back
// takes once they pass their budget: writeBackChunk while the cache is on,
// so no single MultiPut pays for a large backlog; all (-1) while it is
// off, when nearly every write is a key not written for long and the
// skiplist insert is the cost a longer sorted run cuts.
func (c *valueCache) writeBackRun() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return -1
	}
	return writeBackChunk
}

// bufferedBytes is the size of the dirty entries.
func (c *valueCache) bufferedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirtyBytes
}

func (c *valueCache) dirtyLen() int { return len(c.dirty) - c.dirtyHead }

// oldestDirty calls add for up to n of the oldest dirty entries (all with
// n < 0) and returns how many it passed. Entries stay dirty until
// markWritten: the caller, the only writer, writes them to Pebble first.
func (c *valueCache) oldestDirty(n int, add func(key string, v []byte, present bool) error) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 0 || n > c.dirtyLen() {
		n = c.dirtyLen()
	}
	for _, e := range c.dirty[c.dirtyHead : c.dirtyHead+n] {
		if err := add(e.key, e.v, e.present); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// markWritten marks the n oldest dirty entries clean (they are in Pebble
// now), dropping them while the cache is off.
func (c *valueCache) markWritten(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off && n == c.dirtyLen() {
		// Every entry was dirty and is written: empty the maps at once,
		// keeping their room for the next run.
		for _, e := range c.dirty[c.dirtyHead:] {
			e.dirty, e.gone = false, true
		}
		c.clearCleanLocked()
		for _, m := range c.m.s {
			clear(m)
		}
		c.m.n, c.bytes = 0, 0
		clear(c.dirty)
		c.dirty, c.dirtyHead, c.dirtyBytes, c.dirtyCharge = c.dirty[:0], 0, 0, 0
		c.forgetRecentLocked()
		return
	}
	for i, e := range c.dirty[c.dirtyHead : c.dirtyHead+n] {
		c.markCleanLocked(e)
		c.dirty[c.dirtyHead+i] = nil
	}
	c.dirtyHead += n
	if c.dirtyHead == len(c.dirty) {
		c.dirty, c.dirtyHead = c.dirty[:0], 0
	} else if c.dirtyHead > len(c.dirty)/2 && c.dirtyHead > 1024 {
		c.dirty = append(c.dirty[:0], c.dirty[c.dirtyHead:]...)
		c.dirtyHead = 0
	}
	c.evictLocked()
}

// markCleanLocked marks a dirty e clean, written to Pebble, and drops it
// while the cache is off (off, the cache keeps no clean entry). The caller
// takes it off the dirty list.
func (c *valueCache) markCleanLocked(e *cachedValue) {
	e.dirty = false
	c.countDirty(e, -1)
	if c.off {
		c.m.del(e.key)
		c.goneLocked(e)
		c.bytes -= c.charge(e)
		return
	}
	c.queueCleanLocked(e)
}

// countDirty adds (sign 1) or removes (sign -1) e's size and charge to
// or from the dirty totals: the budget counts bytes, eviction charges.
// Call it while e's value is the one counted.
func (c *valueCache) countDirty(e *cachedValue, sign int64) {
	c.dirtyBytes += sign * e.size()
	c.dirtyCharge += sign * c.charge(e)
}

// reset forgets everything (after a range delete or a failed write). The
// caller writes the dirty entries to Pebble first: reset drops them too.
func (c *valueCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m.each(func(_ string, e *cachedValue) bool {
		e.gone = true // a recent entry still pointing at it must not be used
		return true
	})
	c.m.clear()
	c.bytes = 0
	c.clearCleanLocked()
	clear(c.dirty)
	c.dirty, c.dirtyHead, c.dirtyBytes, c.dirtyCharge = c.dirty[:0], 0, 0, 0
	c.forgetRecentLocked()
}

// setEntryLocked caches v (nil = absent) in e, an entry of the map (new
// ones empty), dirty when written back later. An owned v (given up by the
// writer) is kept as it is unless its buffer is much larger than it;
// any other is copied. e's old buffer is left as it is: readers may hold
// it (lookup).
func (c *valueCache) setEntryLocked(e *cachedValue, v []byte, dirty, owned bool) {
	c.bytes -= c.charge(e)
	if e.dirty {
		c.countDirty(e, -1)
	}
	switch {
	case v == nil:
		e.v = nil
	case owned && cap(v) <= 2*len(v)+16:
		e.v = v
	default:
		e.v = append(make([]byte, 0, len(v)), v...)
	}
	e.present = v != nil
	c.bytes += c.charge(e)
	if dirty && !e.dirty {
		e.dirty = true
		c.dirty = append(c.dirty, e)
	}
	// A clean write over a dirty entry cannot happen (fill skips known
	// keys; a write-back cache never writes through, and a write-through
	// cache has no dirty entries), so a dirty entry stays listed until
	// markWritten.
	if e.dirty {
		c.countDirty(e, 1)
	} else {
		c.queueCleanLocked(e)
	}
}
