package statesvc

// PutMoved writes state a bulk move brought to s (stop-and-restart, DRRS
// subscales): keys this store has not held since it last gave their
// buckets away. A Pebble store keeps them as buffered writes of its
// value cache, as MultiPut would, but in one allocation for all keys, one
// for all values and one for all entries, and into a map sized for them
// when the cache is empty (a new task's): after profiling, a key's three
// allocations and the map's growth were most of the new owner's cost per
// key. Other stores write as usual.
func PutMoved(s Store, kvs []KV) error {
	if p, ok := s.(*Pebble); ok {
		return p.putMoved(kvs)
	}
	return s.MultiPut(kvs)
}

func (p *Pebble) putMoved(kvs []KV) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.volatile && p.cache.bufferMoved(kvs) {
		return p.writeBackLocked(false)
	}
	p.cache.beginWrite()
	if err := p.commitLocked(kvs, nil, "moved writes"); err != nil {
		return err
	}
	p.cache.wrote(kvs)
	return nil
}

// bufferMoved is buffer for a batch of moved state (see PutMoved): a key
// the cache already knows is updated in place, every other one gets an
// entry from the batch's shared allocations, in its bucket's map, made
// with room for the batch's keys of that bucket when the bucket is new
// here. Entries share their batch's buffers for as long as any of them is
// cached; a bulk move's batch is one chunk of at most
// StateMigrationChunkSize bytes.
func (c *valueCache) bufferMoved(kvs []KV) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return false
	}
	c.gen++
	nk, nv := 0, 0
	for _, kv := range kvs {
		nk += len(kv.Key)
		nv += len(kv.Value)
	}
	kb := make([]byte, 0, nk)
	for _, kv := range kvs {
		kb = append(kb, kv.Key...)
	}
	keys := string(kb)
	vals := make([]byte, 0, nv)
	ents := make([]cachedValue, len(kvs))
	off := 0
	shard, m, fresh := -1, map[string]*cachedValue(nil), false
	for i, kv := range kvs {
		k := keys[off : off+len(kv.Key)]
		off += len(kv.Key)
		if si := shardOf(k); si != shard {
			// A chunk holds a bucket's keys together: size a new map
			// for the run of keys of this bucket.
			run := 1
			for _, next := range kvs[i+1:] {
				if shardOf(next.Key) != si {
					break
				}
				run++
			}
			shard, fresh = si, si >= len(c.m.s) || len(c.m.s[si]) == 0
			m = c.m.shard(si, run)
		}
		if !fresh {
			if e := m[k]; e != nil {
				c.setEntryLocked(e, kv.Value, true)
				continue
			}
		}
		e := &ents[i]
		e.key = k
		if kv.Value != nil {
			s := len(vals)
			vals = append(vals, kv.Value...)
			e.v = vals[s:len(vals):len(vals)]
			e.present = true
		}
		before := len(m)
		m[k] = e
		if len(m) == before {
			// The key came twice in a fresh bucket: keep the first
			// entry, with the later value.
			for j := i - 1; j >= 0; j-- {
				if old := &ents[j]; old.key == k && old.dirty {
					m[k] = old
					c.setEntryLocked(old, kv.Value, true)
					break
				}
			}
			continue
		}
		c.m.n++
		e.dirty = true
		c.bytes += e.size()
		c.dirtyBytes += e.size()
		c.dirty = append(c.dirty, e)
	}
	c.forgetRecentLocked()
	c.evictLocked()
	return true
}
