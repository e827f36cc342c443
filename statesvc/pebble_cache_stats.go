package statesvc

// CacheStats are a Pebble store's value-cache counters since the store
// was opened: read-only, for benchmarks that must show whether a state
// larger than the cache was really read from Pebble (a high hit rate
// means the keys read fit the cache, whatever the state's total size).
type CacheStats struct {
	// Lookups counts the keys MultiGet looked up, with the cache on or
	// off (a key looked up while the cache is off is a lookup without a
	// hit); Hits the keys the cache answered, present or known absent.
	Lookups, Hits uint64
	// LimitBytes is the cache's capacity (CacheBytes * valueCacheMultiple, at
	// most maxValueCacheBytes).
	LimitBytes int64
}

// CacheStats returns the value cache's counters.
func (p *Pebble) CacheStats() CacheStats {
	c := p.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Lookups: c.totalLookups, Hits: c.totalHits, LimitBytes: c.limit}
}
