package statesvc

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

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
	b := p.db.NewBatchWithSize(size)
	err := p.batchSorted(b, kvs, nil)
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	_ = b.Close()
	if err != nil {
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
	lo, hi, all := shardSpan(start, end)
	if all {
		for _, e := range c.dirty[c.dirtyHead:] {
			add(e)
		}
		return es, kvs, size
	}
	// The range's bucket shards, and shard 0 (keys too short for a bucket).
	for i := lo; i <= hi && i < len(c.m.s); i++ {
		for _, e := range c.m.s[i] {
			add(e)
		}
	}
	if lo > 0 && len(c.m.s) > 0 {
		for _, e := range c.m.s[0] {
			add(e)
		}
	}
	return es, kvs, size
}

// markEntriesWritten marks es clean (they are in Pebble now), dropping them
// while the cache is off, and takes them off the dirty list, whose other
// entries keep their order.
func (c *valueCache) markEntriesWritten(es []*cachedValue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range es {
		if !e.dirty {
			continue
		}
		e.dirty = false
		c.countDirty(e, -1)
		if c.off { // off, the cache keeps no clean entry
			c.m.del(e.key)
			e.gone = true
			c.bytes -= c.charge(e)
		}
	}
	c.afterDropLocked(len(es) > 0)
	c.evictLocked()
}
