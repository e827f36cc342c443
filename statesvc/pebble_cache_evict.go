package statesvc

// The value cache's eviction: a queue of its clean entries, oldest first.

// evictLocked drops clean entries, oldest queued first, once the limit is
// passed, freeing a quarter of the room the dirty entries leave (a quarter
// of the limit without any). Dirty entries stay: with them taking up to
// their budget, a fixed target such as 3/4 of the limit might be out of
// reach. At most maxEvictStep goes at once: a large cache that dropped a
// quarter of itself shrank the heap by a hundred megabytes, which the
// runtime handed back to the system only for the cache to take it again
// (q5's window state: runtime.madvise was 15 % of the task's worker).
func (c *valueCache) evictLocked() {
	if c.bytes <= c.limit || c.bytes <= c.dirtyCharge {
		return
	}
	target := c.limit - min((c.limit-c.dirtyCharge)/4, maxEvictStep)
	for c.cleanHead < len(c.clean) {
		e := c.clean[c.cleanHead]
		c.clean[c.cleanHead] = nil
		c.cleanHead++
		e.queued = false
		if e.gone {
			c.cleanGone--
			continue
		}
		if e.dirty {
			continue // queued again once written back
		}
		c.m.del(e.key)
		e.gone = true
		c.bytes -= c.charge(e)
		if c.bytes <= target || c.bytes <= c.dirtyCharge {
			break
		}
	}
	c.compactCleanLocked()
}

// queueCleanLocked queues clean e for eviction unless it is queued.
func (c *valueCache) queueCleanLocked(e *cachedValue) {
	if !e.queued {
		e.queued = true
		c.clean = append(c.clean, e)
	}
}

// goneLocked marks e, taken out of the map, gone, counting it among the
// clean queue's dropped entries when it is queued.
func (c *valueCache) goneLocked(e *cachedValue) {
	e.gone = true
	if e.queued {
		c.cleanGone++
	}
}

// clearCleanLocked empties the clean queue (every clean entry is being
// dropped).
func (c *valueCache) clearCleanLocked() {
	for _, e := range c.clean[c.cleanHead:] {
		e.queued = false
	}
	clear(c.clean)
	c.clean, c.cleanHead, c.cleanGone = c.clean[:0], 0, 0
}

// compactCleanLocked keeps the clean queue's memory in proportion to the
// clean entries: it drops the queue's passed head once that is most of
// it, and the entries dirtied or dropped since they were queued once
// dropped ones are most of it (a dropped entry's value must not be kept
// alive by the queue for long).
func (c *valueCache) compactCleanLocked() {
	live := len(c.clean) - c.cleanHead
	switch {
	case live == 0:
		clear(c.clean)
		c.clean, c.cleanHead, c.cleanGone = c.clean[:0], 0, 0
	case c.cleanGone > 1024 && c.cleanGone > live/2:
		kept := c.clean[:0]
		for _, e := range c.clean[c.cleanHead:] {
			if e.gone || e.dirty {
				e.queued = false
				continue
			}
			kept = append(kept, e)
		}
		clear(c.clean[len(kept):])
		c.clean, c.cleanHead, c.cleanGone = kept, 0, 0
	case c.cleanHead > 1024 && c.cleanHead > len(c.clean)/2:
		n := copy(c.clean, c.clean[c.cleanHead:])
		clear(c.clean[n:])
		c.clean, c.cleanHead = c.clean[:n], 0
	}
}
