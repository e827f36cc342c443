package statesvc

import "sync"

// valueCache is a bounded write-through cache of values in front of Pebble.
// A stateful operator reads and writes the same hot keys batch after batch;
// in Pebble each read is a seek through the memtable skiplist (where every
// update left a version) and the sstables, which profiling of the keyed
// counter showed as half of its CPU. The cache answers those reads from a
// map. It also remembers keys known to be absent.
//
// Coherence: MultiPut and DeleteRange update or clear the cache after their
// write and bump gen before and after it; a MultiGet fills in what it read
// from Pebble only if gen did not move meanwhile, so a read that raced with
// a write never installs the older value. Cached slices are never modified
// (a write installs a new copy), so readers may copy them outside the lock.
//
// A working set much larger than the cache makes it pure overhead (copies
// and evictions for few hits), so it switches itself off when it is full
// (evicting) and fewer than a quarter of a window's lookups hit, and tries
// again after a while; a cold cache that is still filling stays on. Every
// write bumps gen whether the cache is on or not, so a fill never installs
// a value older than a write it did not see.
type valueCache struct {
	mu       sync.Mutex
	m        map[string]*cachedValue // by pointer: a rewrite of a known key updates in place
	bytes    int64
	limit    int64
	gen      uint64
	off      bool
	lookups  int // in the current window
	hits     int
	bypassed int // keys looked up while off
}

const (
	cacheWindow      = 1 << 14 // lookups per hit-rate decision
	cacheRetryAfter  = 1 << 22 // keys bypassed before trying again
	cacheMinHitShare = 4       // off below 1/4 hits
)

type cachedValue struct {
	v       []byte
	present bool
}

// cacheEntryOverhead approximates the map entry and string header cost.
const cacheEntryOverhead = 80

func newValueCache(limit int64) *valueCache {
	return &valueCache{m: make(map[string]*cachedValue), limit: limit}
}

// lookup resolves what it can: vals[i] for hits (shared, immutable
// slices), and returns the indices of keys it does not know plus the
// generation to pass to fill. vals is nil when the cache is off (every key
// is a miss).
func (c *valueCache) lookup(keys [][]byte) (vals []cachedValue, miss []int, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		if c.bypassed += len(keys); c.bypassed >= cacheRetryAfter {
			c.off, c.bypassed = false, 0
		}
		return nil, nil, c.gen
	}
	vals = make([]cachedValue, len(keys))
	for i, k := range keys {
		if e := c.m[string(k)]; e != nil {
			vals[i] = *e
			c.hits++
		} else {
			miss = append(miss, i)
		}
	}
	if c.lookups += len(keys); c.lookups >= cacheWindow {
		if c.hits*cacheMinHitShare < c.lookups && c.bytes >= c.limit/2 {
			c.off = true
			c.gen++
			clear(c.m)
			c.bytes = 0
		}
		c.lookups, c.hits = 0, 0
	}
	return vals, miss, c.gen
}

// fill caches values read from Pebble at generation gen (nil = absent).
func (c *valueCache) fill(gen uint64, keys, vals [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.off {
		return // a write ran meanwhile (what was read may be older), or off
	}
	for i, k := range keys {
		c.setLocked(k, vals[i])
	}
	c.evictLocked()
}

// beginWrite invalidates in-flight fills before a write.
func (c *valueCache) beginWrite() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// wrote records a committed batch.
func (c *valueCache) wrote(kvs []KV) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.off {
		return
	}
	for _, kv := range kvs {
		c.setLocked(kv.Key, kv.Value)
	}
	c.evictLocked()
}

// reset forgets everything (after a range delete or a failed write).
func (c *valueCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
	c.bytes = 0
}

func (c *valueCache) setLocked(k, v []byte) {
	var cv []byte
	if v != nil {
		cv = append(make([]byte, 0, len(v)), v...)
	}
	// Updating a known key in place saves copying the key into a new map
	// key on every write of a hot key.
	if e := c.m[string(k)]; e != nil {
		c.bytes += int64(len(cv) - len(e.v))
		e.v, e.present = cv, v != nil
		return
	}
	c.m[string(k)] = &cachedValue{v: cv, present: v != nil}
	c.bytes += int64(len(k) + len(cv) + cacheEntryOverhead)
}

// evictLocked drops entries in map order (pseudo-random) down to 3/4 of the
// limit once the limit is passed.
func (c *valueCache) evictLocked() {
	if c.bytes <= c.limit {
		return
	}
	for k, e := range c.m {
		delete(c.m, k)
		c.bytes -= int64(len(k) + len(e.v) + cacheEntryOverhead)
		if c.bytes <= c.limit*3/4 {
			return
		}
	}
}
