package statesvc

import "fmt"

// PutMoved writes state a bulk move brought to s (stop-and-restart, DRRS
// subscales), packed (packed.go): keys this store has not held since it
// last gave their buckets away. PutMoved keeps chunk (the values stay in
// it). A Pebble store keeps them as buffered writes of its value cache, as
// MultiPut would, but with no allocation per key: the keys are substrings
// of one copy of the chunk, the values slices of the chunk, the entries
// one slice, and a bucket's map is made with room for them when the
// bucket is new here. After profiling, a key's three allocations and the
// map's growth were most of the new owner's cost per key. Other stores
// write as usual.
func PutMoved(s Store, chunk []byte) error {
	if p, ok := s.(*Pebble); ok {
		return p.putMoved(chunk)
	}
	kvs, err := unpack(chunk)
	if err != nil {
		return err
	}
	return s.MultiPut(kvs)
}

func unpack(chunk []byte) ([]KV, error) {
	var kvs []KV
	if _, err := eachPacked(chunk, func(k, v []byte) bool {
		kvs = append(kvs, KV{Key: k, Value: v})
		return true
	}); err != nil {
		return nil, fmt.Errorf("statesvc: moved state: %w", err)
	}
	return kvs, nil
}

func (p *Pebble) putMoved(chunk []byte) error {
	if err := p.enter(); err != nil {
		return err
	}
	defer p.exit()
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.volatile {
		if err := p.cache.bufferMoved(chunk); err != nil {
			return err
		}
		return p.writeBackLocked(false)
	}
	kvs, err := unpack(chunk)
	if err != nil {
		return err
	}
	p.cache.beginWrite()
	if err := p.commitLocked(kvs, nil, "moved writes"); err != nil {
		return err
	}
	p.cache.wrote(kvs, nil)
	return nil
}

// bufferMoved is buffer for a chunk of moved state (see PutMoved): a key
// the cache already knows is updated in place, every other one gets an
// entry in its bucket's map, made with room for the chunk's keys of that
// bucket when the bucket is new here. Entries share the chunk's buffers
// for as long as any of them is cached; a chunk is at most
// StateMigrationChunkSize bytes. It returns an error, caching nothing, for
// a malformed chunk.
func (c *valueCache) bufferMoved(chunk []byte) error {
	n := 0
	if _, err := eachPacked(chunk, func(_, _ []byte) bool { n++; return true }); err != nil {
		return fmt.Errorf("statesvc: moved state: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	keys := string(chunk) // a key is the substring at its offset in chunk
	ents := make([]cachedValue, n)
	shard, m, fresh := -1, map[string]*cachedValue(nil), false
	for i, rest := 0, chunk; len(rest) > 0; i++ {
		kb, v, next, _ := NextPacked(rest) // checked above
		off := len(chunk) - len(rest) + uvarintLen(uint64(len(kb)))
		rest = next
		k := keys[off : off+len(kb)]
		if si := shardOf(k); si != shard {
			// A chunk holds a bucket's keys together: size a new map
			// for the run of keys of this bucket.
			run := 1
			for r := rest; len(r) > 0; run++ {
				nk, _, nr, _ := NextPacked(r)
				if shardOf(nk) != si {
					break
				}
				r = nr
			}
			shard, fresh = si, si >= len(c.m.s) || len(c.m.s[si]) == 0
			m = c.m.shard(si, run)
		}
		if !fresh {
			if e := m[k]; e != nil {
				c.setEntryLocked(e, v, true, false)
				continue
			}
		}
		e := &ents[i]
		e.key, e.v, e.present = k, v, true
		before := len(m)
		m[k] = e
		if len(m) == before {
			// The key came twice in a fresh bucket: keep the first
			// entry, with the later value.
			for j := i - 1; j >= 0; j-- {
				if old := &ents[j]; old.key == k && old.dirty {
					m[k] = old
					c.setEntryLocked(old, v, true, false)
					break
				}
			}
			continue
		}
		c.m.n++
		e.dirty = true
		c.bytes += c.charge(e)
		c.countDirty(e, 1)
		c.dirty = append(c.dirty, e)
	}
	c.forgetRecentLocked()
	c.evictLocked()
	return nil
}
