package statesvc

import "slices"

// Cold reads and writes: state migration reads the values of the buckets
// a task gave away once, to hand them over, and the new owner writes
// values it has not read and may not for a long time. Through the value
// cache both would evict the task's own working set — a migration of as
// many keys as the task works on emptied its cache and tripled its batches'
// read time — and a read would also count against the cache's hit rate and
// replace the keys the task's next write finds among its recent lookups.

// GetCold is MultiGet that leaves the value cache as it is: a key it
// holds is answered from it (it may be newer than Pebble), every other is
// read from Pebble and not added.
func (p *Pebble) GetCold(keys [][]byte) ([][]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.exit()
	out := make([][]byte, len(keys))
	miss := p.cache.peek(keys, out)
	if len(miss) == 0 {
		return out, nil
	}
	mk := make([][]byte, len(miss))
	for j, i := range miss {
		mk[j] = keys[i]
	}
	read, err := p.readPebble(mk)
	if err != nil {
		return nil, err
	}
	for j, i := range miss {
		out[i] = read[j]
	}
	return out, nil
}

// PutCold is MultiPut that leaves the value cache's other entries alone:
// a key the cache holds is updated there (still dirty if it was: its write
// is pending anyway), every other is written to Pebble directly, uncached.
func (p *Pebble) PutCold(kvs []KV) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.cache.beginWrite() // fills that read Pebble before this commit are dropped
	pending := p.cache.updateKnown(kvs)
	if !slices.Contains(pending, false) { // every key was dirty in the cache
		p.cache.beginWrite()
		return p.writeBackLocked(false)
	}
	if err := p.commitLocked(kvs, pending, "cold writes"); err != nil {
		return err
	}
	p.cache.beginWrite()
	// Entries updated in place may have grown the dirty bytes.
	return p.writeBackLocked(false)
}

// GetCold reads keys of s without adding them to a value cache
// (Pebble.GetCold); other stores read as usual.
func GetCold(s Store, keys [][]byte) ([][]byte, error) {
	if c, ok := s.(interface {
		GetCold(keys [][]byte) ([][]byte, error)
	}); ok {
		return c.GetCold(keys)
	}
	return s.MultiGet(keys)
}

// PutCold writes kvs to s without adding them to a value cache
// (Pebble.PutCold); other stores write as usual.
func PutCold(s Store, kvs []KV) error {
	if c, ok := s.(interface{ PutCold(kvs []KV) error }); ok {
		return c.PutCold(kvs)
	}
	return s.MultiPut(kvs)
}

// peek answers keys the cache holds into out (shared, as lookup does;
// nil for a key cached as absent) and returns the indices of the others,
// without counting toward the hit rate, touching the recent entries or
// adding anything.
func (c *valueCache) peek(keys, out [][]byte) (miss []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off && c.dirtyLen() == 0 { // off, the entries are dirty ones only
		miss = make([]int, len(keys))
		for i := range miss {
			miss[i] = i
		}
		return miss
	}
	for i, k := range keys {
		e := c.m.get(k)
		if e == nil {
			miss = append(miss, i)
			continue
		}
		if e.present {
			out[i] = e.shared()
		}
	}
	return miss
}

// updateKnown writes kvs into the entries the cache holds for their keys
// and reports those that are dirty: their write to Pebble is pending
// anyway, while the caller writes every other key to Pebble itself. The
// caller holds wmu.
func (c *valueCache) updateKnown(kvs []KV) []bool {
	known := make([]bool, len(kvs))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off && c.dirtyLen() == 0 {
		return known
	}
	for i, kv := range kvs {
		e := c.m.get(kv.Key)
		if e == nil {
			continue
		}
		c.setEntryLocked(e, kv.Value, e.dirty, false)
		known[i] = e.dirty
	}
	c.evictLocked()
	return known
}
