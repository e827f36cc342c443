package statesvc

import "fmt"

// WarmCache reads the store's values into its value cache, in key order,
// until the cache is nearly full or every key is in, and returns how many
// keys and value bytes it read in.
//
// A store restored from a checkpoint (a warm-up snapshot) starts with an
// empty value cache, so its task first reads every key from Pebble's blob
// files, one miss at a time: q6*'s one task took 10–15 s to climb from
// 10 K to ~130 K events/s after loading 435 MB of sellers, and the backlog
// of that climb, not the overload, was most of the lag at the trigger
// (EXPERIMENTS.md, "Warm value cache on snapshot load"). A store that was
// filled by writes (a remote store importing the snapshot, the new owner
// of a bulk move) already has them cached; this gives a restored one the
// same start, with one sequential pass instead of a miss per key.
//
// Call it before the store is used: it stops at the first write made
// meanwhile (what it read may then be older than the write), keeping
// what it cached before.
func (p *Pebble) WarmCache() (keys int, bytes int64, err error) {
	if err := p.enter(); err != nil {
		return 0, 0, err
	}
	defer p.exit()
	gen, room := p.cache.warmStart()
	if room <= 0 {
		return 0, 0, nil
	}
	it, err := p.db.NewIter(nil)
	if err != nil {
		return 0, 0, fmt.Errorf("statesvc: warm the value cache: %w", err)
	}
	var batch []KV
	var batchBytes int64
	flush := func() bool {
		n, nb, more := p.cache.warm(gen, batch)
		keys, bytes = keys+n, bytes+nb
		batch, batchBytes = batch[:0], 0
		return more
	}
	more := true
	for ok := it.First(); ok && more; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return keys, bytes, fmt.Errorf("statesvc: warm the value cache at %q: %w", it.Key(), err)
		}
		// The iterator's key and value are valid until Next: the cache
		// keeps these copies (warm takes them as given up).
		batch = append(batch, KV{Key: append([]byte(nil), it.Key()...), Value: append(make([]byte, 0, len(v)), v...)})
		if batchBytes += int64(len(v)); batchBytes >= warmBatchBytes {
			more = flush()
		}
	}
	if more && len(batch) > 0 {
		flush()
	}
	if err := it.Close(); err != nil {
		return keys, bytes, fmt.Errorf("statesvc: warm the value cache: %w", err)
	}
	return keys, bytes, nil
}

// warmBatchBytes is how much WarmCache reads between taking the cache's
// lock.
const warmBatchBytes = 1 << 20

// warmShare is the part of the cache's limit WarmCache fills (7/8): the
// rest is left so that the first writes of new keys do not start by
// evicting what was just read in.
const (
	warmShareNum = 7
	warmShareDen = 8
)

// warmStart returns the generation a warm-up fills at and the room it may
// fill (none when the cache is off).
func (c *valueCache) warmStart() (gen uint64, room int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return c.gen, 0
	}
	return c.gen, c.limit/warmShareDen*warmShareNum - c.bytes
}

// warm caches kvs (values given up by the caller) as clean entries, in
// order, skipping keys already cached, until the cache holds its warm
// share. It returns how many it cached and their value bytes, and whether
// to go on: false once the share is reached, the cache is off, or a
// write moved gen past the warm-up's.
func (c *valueCache) warm(gen uint64, kvs []KV) (n int, bytes int64, more bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.off {
		return 0, 0, false
	}
	share := c.limit / warmShareDen * warmShareNum
	for _, kv := range kvs {
		if c.m.get(kv.Key) != nil {
			continue
		}
		e := c.addLocked(string(kv.Key))
		c.setEntryLocked(e, kv.Value, false, true)
		n++
		bytes += int64(len(kv.Value))
		if c.bytes >= share {
			return n, bytes, false
		}
	}
	return n, bytes, true
}

// WarmCache warms s's value cache when s has one (Pebble.WarmCache);
// other stores have nothing to warm.
func WarmCache(s Store) (keys int, bytes int64, err error) {
	if w, ok := s.(interface {
		WarmCache() (int, int64, error)
	}); ok {
		return w.WarmCache()
	}
	return 0, 0, nil
}
