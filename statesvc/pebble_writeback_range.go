package statesvc

import "fmt"

// writeBackRangeLocked writes the dirty entries with keys in [start, end)
// to Pebble, so that an iterator over that range sees them, and leaves the
// others buffered. A Scan of a few buckets (a timer index, a checkpoint's
// part, a key listing) then costs what those buckets hold, not a write-back
// of the whole dirty budget, which, sized to absorb a working set's
// rewrites, is hundreds of megabytes. An unbounded range writes all. The
// caller holds wmu.
func (p *Pebble) writeBackRangeLocked(start, end []byte) error {
	if len(start) == 0 && len(end) == 0 {
		return p.writeBackLocked(true)
	}
	es, kvs, size := p.cache.dirtyEntriesInRange(start, end)
	if len(es) == 0 {
		return nil
	}
	if err := p.commitSorted(kvs, size); err != nil {
		return fmt.Errorf("statesvc: pebble write back %d cached writes in [%q, %q): %w", len(es), start, end, err)
	}
	p.cache.markEntriesWritten(es)
	return nil
}

// dirtyEntriesInRange returns the dirty entries with keys in [start, end),
// their writes as KVs (values shared with the entries: only the caller, the
// single writer holding wmu, changes them) and the batch size they need.
func (c *valueCache) dirtyEntriesInRange(start, end []byte) (es []*cachedValue, kvs []KV, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	add := func(e *cachedValue) {
		if !e.dirty || !inRange(e.key, start, end) {
			return
		}
		kv := KV{Key: []byte(e.key)}
		if e.present {
			kv.Value = e.v[:len(e.v):len(e.v)]
			if kv.Value == nil {
				kv.Value = []byte{}
			}
		}
		es = append(es, e)
		kvs = append(kvs, kv)
		size += len(e.key) + len(e.v) + batchEntryOverhead
	}
	if _, _, all := shardSpan(start, end); all {
		// Every shard may hold the range: the dirty list is shorter.
		for _, e := range c.dirty[c.dirtyHead:] {
			add(e)
		}
		return es, kvs, size
	}
	c.eachShardOf(start, end, func(i int) {
		for _, e := range c.m.s[i] {
			add(e)
		}
	})
	return es, kvs, size
}

// markEntriesWritten marks es clean (they are in Pebble now), dropping them
// while the cache is off, and takes them off the dirty list, whose other
// entries keep their order.
func (c *valueCache) markEntriesWritten(es []*cachedValue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range es {
		if e.dirty {
			c.markCleanLocked(e)
		}
	}
	c.afterDropLocked(len(es) > 0)
	c.evictLocked()
}
