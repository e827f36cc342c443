package statesvc

import "slices"

// The value cache's ranges: copying a range's dirty entries for a handoff
// or a bulk move, and dropping a range's entries once it is given away.

// dirtyRange is a copy of a range's dirty entries (writes not yet in
// Pebble): the present ones packed (packed.go) in chunks, the keys of the
// absent ones (buffered deletes), and the shards that hold keys of the
// range only. Packed rather than a record per entry: after profiling,
// filling records of pointers was a third of a bulk move's cost per key on
// its old owner, and a bulk move sends the chunks as they are.
type dirtyRange struct {
	chunks  [][]byte
	absent  [][]byte
	whole   []int
	partial []int
}

// mayCache says whether the cache may hold an entry for k outside the
// shards d.whole lists (which forget drops whole): a key of a shard that
// held no entry of the range has none, and the range is not written while
// it is handed out.
func (d *dirtyRange) mayCache(k []byte) bool {
	return slices.Contains(d.partial, shardOf(k))
}

// each calls fn for every present entry until it returns false, and
// reports whether it went through all.
func (d *dirtyRange) each(fn func(k, v []byte) bool) bool {
	for _, c := range d.chunks {
		if all, _ := eachPacked(c, fn); !all {
			return false // the chunks are well formed: fn stopped
		}
	}
	return true
}

// keys calls fn for every entry's key, absent ones included.
func (d *dirtyRange) keys(fn func(k []byte)) {
	d.each(func(k, _ []byte) bool { fn(k); return true })
	for _, k := range d.absent {
		fn(k)
	}
}

// inRange says whether k lies in [start, end); a nil end is unbounded.
func inRange(k string, start, end []byte) bool {
	return k >= string(start) && (end == nil || k < string(end))
}

// eachShardOf calls fn with the index of every shard that may hold keys in
// [start, end): the range's bucket shards and shard 0 (keys too short for
// a bucket), or all of them when the range spans more than one operator.
func (c *valueCache) eachShardOf(start, end []byte, fn func(i int)) {
	lo, hi, all := shardSpan(start, end)
	if all {
		lo, hi = 0, len(c.m.s)-1
	}
	for i := lo; i <= hi && i < len(c.m.s); i++ {
		fn(i)
	}
	if !all && lo > 0 && len(c.m.s) > 0 {
		fn(0)
	}
}

// dirtyInRange copies the dirty entries with keys in [start, end), in no
// particular order, the present ones in chunks of at most limit bytes (0:
// one chunk; a chunk holds one pair at least). The caller holds wmu, so no
// write-back moves them to Pebble meanwhile.
func (c *valueCache) dirtyInRange(start, end []byte, limit int) (d dirtyRange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	c.eachShardOf(start, end, func(i int) { n += len(c.m.s[i]) })
	if n == 0 {
		return d
	}
	var chunk []byte
	scan := func(i int) {
		m := c.m.s[i]
		in := 0
		for k, e := range m {
			if !inRange(k, start, end) {
				continue
			}
			in++
			if !e.dirty {
				continue
			}
			if !e.present {
				d.absent = append(d.absent, []byte(k))
				continue
			}
			need := PackedSize(len(k), len(e.v))
			if len(chunk) > 0 && limit > 0 && len(chunk)+need > limit {
				d.chunks = append(d.chunks, chunk)
				chunk = nil
			}
			if chunk == nil {
				// Room for every candidate at this entry's size, up to
				// the limit: one allocation when values are of similar
				// size.
				size := n * need
				if limit > 0 {
					size = min(size, max(limit, need))
				}
				chunk = make([]byte, 0, size)
			}
			chunk = appendPackedString(chunk, k, e.v)
		}
		switch {
		case in > 0 && in == len(m):
			d.whole = append(d.whole, i)
		case in > 0:
			d.partial = append(d.partial, i)
		}
	}
	c.eachShardOf(start, end, scan)
	if len(chunk) > 0 {
		d.chunks = append(d.chunks, chunk)
	}
	return d
}

// dropRange forgets every entry with a key in [start, end), dirty ones
// too: a range delete supersedes their writes, so they need never reach
// Pebble. The caller holds wmu. Unlike reset, the rest of the cache (the
// keys a task keeps after giving some buckets away) stays warm.
func (c *valueCache) dropRange(start, end []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	dropped := false
	c.m.each(func(k string, e *cachedValue) bool {
		if inRange(k, start, end) {
			dropped = c.dropLocked(e) || dropped
		}
		return true
	})
	c.afterDropLocked(dropped)
}

// dropLocked removes e from the cache, dirty or not, and reports whether
// it was dirty (the dirty list then needs afterDropLocked).
func (c *valueCache) dropLocked(e *cachedValue) bool {
	c.m.del(e.key)
	c.goneLocked(e)
	c.bytes -= c.charge(e)
	if !e.dirty {
		return false
	}
	e.dirty = false
	c.countDirty(e, -1)
	return true
}

// afterDropLocked takes dropped dirty entries off the dirty list, keeping
// the others' order (write-back takes the oldest first).
func (c *valueCache) afterDropLocked(dropped bool) {
	if dropped {
		kept := c.dirty[:0]
		for _, e := range c.dirty[c.dirtyHead:] {
			if e.dirty {
				kept = append(kept, e)
			}
		}
		clear(c.dirty[len(kept):])
		c.dirty, c.dirtyHead = kept, 0
	}
	c.compactCleanLocked()
	c.forgetRecentLocked()
}

// forget drops the entries of the buffered writes copied (by MoveOut,
// under the same wmu) and of the keys read from Pebble, dirty or not: their
// range was handed away and deleted. The shards d.whole lists hold keys of
// that range only: they go at once, without a map delete per key. Entries
// of cached absences in other shards stay: the keys are absent.
func (c *valueCache) forget(d *dirtyRange, onDisk [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	dropped := false
	for _, i := range d.whole {
		for _, e := range c.m.s[i] {
			c.goneLocked(e)
			c.bytes -= c.charge(e)
			if e.dirty {
				e.dirty = false
				c.countDirty(e, -1)
				dropped = true
			}
		}
		c.m.dropShard(i)
	}
	drop := func(k []byte) {
		if e := c.m.get(k); e != nil {
			dropped = c.dropLocked(e) || dropped
		}
	}
	d.keys(drop) // a no-op for the keys of whole shards: their maps are gone
	for _, k := range onDisk {
		drop(k)
	}
	c.afterDropLocked(dropped)
}
