package statesvc

// RecentKeys lists the keys of s in ranges that its value cache holds with
// a value, the entries written most recently first, then those read (or
// written back) most recently, until their keys and values reach maxBytes.
// A lazy handoff sends these keys' state ahead of its lookup entries
// (dataplane's handoff_hot.go): under a skewed key distribution the keys a
// task touched last are the ones its buckets' next records touch, and each
// would otherwise cost the new owner an on-demand fetch in its first
// batches, one point read and delete at a time on the old owner.
//
// Stores without a value cache (remote state, the in-memory store) list
// none. The order is the cache's own: the dirty list by when an entry was
// last made dirty, the clean queue by when it became clean.
func RecentKeys(s Store, ranges []KeyRange, maxBytes int) [][]byte {
	if r, ok := s.(interface {
		RecentKeys(ranges []KeyRange, maxBytes int) [][]byte
	}); ok {
		return r.RecentKeys(ranges, maxBytes)
	}
	return nil
}

// RecentKeys is the package's RecentKeys for a Pebble store.
func (p *Pebble) RecentKeys(ranges []KeyRange, maxBytes int) [][]byte {
	if maxBytes <= 0 || len(ranges) == 0 || p.enter() != nil {
		return nil
	}
	defer p.exit()
	return p.cache.recentKeys(ranges, maxBytes)
}

func (c *valueCache) recentKeys(ranges []KeyRange, maxBytes int) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var (
		out  [][]byte
		size int
		seen = map[*cachedValue]bool{}
	)
	// take reports whether to go on.
	take := func(e *cachedValue) bool {
		if e == nil || e.gone || !e.present {
			return true
		}
		in := false
		for _, r := range ranges {
			if inRange(e.key, r.Start, r.End) {
				in = true
				break
			}
		}
		// An entry dirtied after it was queued clean is on both lists.
		if !in || seen[e] {
			return true
		}
		seen[e] = true
		out = append(out, []byte(e.key))
		size += len(e.key) + len(e.v)
		return size < maxBytes
	}
	for i := len(c.dirty) - 1; i >= c.dirtyHead; i-- {
		if !take(c.dirty[i]) {
			return out
		}
	}
	for i := len(c.clean) - 1; i >= c.cleanHead; i-- {
		if !take(c.clean[i]) {
			return out
		}
	}
	return out
}
