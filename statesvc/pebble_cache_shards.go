package statesvc

// cacheShards holds the value cache's entries in one map per bucket of the
// state key layout (layout.go), so that a bulk move drops the buckets it
// handed away a map at a time: after profiling, deleting every moved key
// from one map of all keys was more than half of a stop-and-restart old
// owner's cost per key. Keys outside the layout share shard 0.
type cacheShards struct {
	s []map[string]*cachedValue // by shardOf
	n int
}

// shardOf is the shard of a key: 1 + its bucket for a key of the state
// key layout, else 0.
func shardOf[K ~string | ~[]byte](k K) int {
	if len(k) == 0 {
		return 0
	}
	n := int(k[0])
	if len(k) < 3+n {
		return 0
	}
	return 1 + (int(k[1+n])<<8 | int(k[2+n]))
}

func (c *cacheShards) len() int { return c.n }

// get returns k's entry or nil. It takes the key's bytes so that the map
// index converts them without a copy.
func (c *cacheShards) get(k []byte) *cachedValue {
	if i := shardOf(k); i < len(c.s) && c.s[i] != nil {
		return c.s[i][string(k)]
	}
	return nil
}

func (c *cacheShards) getString(k string) *cachedValue {
	if i := shardOf(k); i < len(c.s) && c.s[i] != nil {
		return c.s[i][k]
	}
	return nil
}

// shard returns shard i's map, made with room for hint entries when it
// does not exist yet.
func (c *cacheShards) shard(i, hint int) map[string]*cachedValue {
	if i >= len(c.s) {
		c.s = append(c.s, make([]map[string]*cachedValue, i+1-len(c.s))...)
	}
	m := c.s[i]
	if m == nil {
		m = make(map[string]*cachedValue, hint)
		c.s[i] = m
	}
	return m
}

// add adds e under k, which the caller knows is not cached.
func (c *cacheShards) add(k string, e *cachedValue) {
	c.shard(shardOf(k), 0)[k] = e
	c.n++
}

// del removes k's entry if any.
func (c *cacheShards) del(k string) {
	if i := shardOf(k); i < len(c.s) && c.s[i] != nil {
		m := c.s[i]
		before := len(m)
		delete(m, k)
		c.n -= before - len(m)
	}
}

// dropShard forgets shard i's map (the caller has dealt with its entries).
func (c *cacheShards) dropShard(i int) {
	c.n -= len(c.s[i])
	c.s[i] = nil
}

// each calls fn for every entry until it returns false.
func (c *cacheShards) each(fn func(k string, e *cachedValue) bool) {
	for _, m := range c.s {
		for k, e := range m {
			if !fn(k, e) {
				return
			}
		}
	}
}

// clear forgets every entry.
func (c *cacheShards) clear() {
	clear(c.s)
	c.n = 0
}

// shardSpan returns the shards that can hold keys of [start, end): when
// both bounds are keys of the layout with the same operator (a bucket
// range), keys between them share that operator and lie in the shards
// from start's to end's, or, too short for a bucket, in shard 0; other
// ranges may touch any shard (all is true).
func shardSpan(start, end []byte) (lo, hi int, all bool) {
	if len(start) == 0 || len(end) == 0 || shardOf(start) == 0 || shardOf(end) == 0 {
		return 0, 0, true
	}
	n := int(start[0])
	if end[0] != start[0] || string(start[1:1+n]) != string(end[1:1+n]) {
		return 0, 0, true
	}
	return shardOf(start), shardOf(end), false
}
