package statesvc

import (
	"slices"
	"sync"
)

// Memory is the in-memory backend: a map for the hot gets and puts plus a
// lazily maintained sorted key index for the rare ordered scans (state
// export). Safe for concurrent use.
//
// The index: every live key is in sorted or pending; sorted may also hold
// keys deleted since (skipped on use). A scan sorts only pending and merges
// it into sorted, so repeated scans without writes cost O(range), and scans
// after a few writes O(n + p log p). If churn makes the index much larger
// than the map it is dropped and rebuilt on the next scan.
type Memory struct {
	mu      sync.RWMutex
	m       map[string][]byte // values are never mutated after insertion
	size    uint64            // sum of len(key)+len(value) of live entries
	sorted  []string          // immutable once published; replaced, never edited
	pending []string          // keys inserted since sorted was built
	rebuild bool              // index invalid: rebuild from m on next scan
	closed  bool
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{m: make(map[string][]byte)} }

// MultiGet implements Store.
func (s *Memory) MultiGet(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	for i, k := range keys {
		out[i] = s.m[string(k)] // no allocation for the lookup
	}
	s.mu.RUnlock()
	return copyValues(out), nil // stored values are immutable: copy outside the lock
}

// MultiPut implements Store.
func (s *Memory) MultiPut(kvs []KV) error {
	// Copy outside the lock, one allocation for all values.
	vals := make([][]byte, len(kvs))
	for i, kv := range kvs {
		vals[i] = kv.Value
	}
	vals = copyValues(vals)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for i, kv := range kvs {
		old, had := s.m[string(kv.Key)]
		if had {
			s.size -= uint64(len(kv.Key) + len(old))
		}
		if kv.Value == nil {
			if had {
				delete(s.m, string(kv.Key))
			}
			continue
		}
		k := string(kv.Key)
		s.m[k] = vals[i]
		s.size += uint64(len(k) + len(vals[i]))
		if !had {
			s.noteInsert(k)
		}
	}
	s.checkIndexBloat()
	return nil
}

func (s *Memory) noteInsert(k string) {
	if !s.rebuild {
		s.pending = append(s.pending, k)
	}
}

// checkIndexBloat drops the index when deleted or re-inserted keys make it
// more than twice the live key count.
func (s *Memory) checkIndexBloat() {
	if !s.rebuild && len(s.sorted)+len(s.pending) > 2*len(s.m)+1024 {
		s.sorted, s.pending, s.rebuild = nil, nil, true
	}
}

// index returns a sorted, deduplicated slice containing every live key
// (possibly plus deleted ones). The returned slice is never modified.
func (s *Memory) index() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rebuild {
		keys := make([]string, 0, len(s.m))
		for k := range s.m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		s.sorted, s.pending, s.rebuild = keys, nil, false
		return s.sorted
	}
	if len(s.pending) == 0 {
		return s.sorted
	}
	slices.Sort(s.pending)
	merged := make([]string, 0, len(s.sorted)+len(s.pending))
	a, b := s.sorted, s.pending
	for len(a) > 0 || len(b) > 0 {
		var k string
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0] < b[0]):
			k, a = a[0], a[1:]
		case len(a) == 0 || b[0] < a[0]:
			k, b = b[0], b[1:]
		default: // equal
			k, a, b = a[0], a[1:], b[1:]
		}
		if n := len(merged); n > 0 && merged[n-1] == k {
			continue
		}
		if _, live := s.m[k]; live { // drop deleted keys while we are at it
			merged = append(merged, k)
		}
	}
	s.sorted, s.pending = merged, nil
	return s.sorted
}

// Scan implements Store. It sees every key that was live when it started and
// stayed live until reached; keys inserted during the scan may be missed.
// fn runs without the store's lock held, so it may call the store.
func (s *Memory) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	keys := s.index()
	lo, _ := slices.BinarySearch(keys, string(start))
	hi := len(keys)
	if end != nil {
		hi, _ = slices.BinarySearch(keys, string(end))
	}
	if lo >= hi {
		return nil
	}
	keys = keys[lo:hi]
	const chunk = 256
	var vals [chunk][]byte
	var kb []byte
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		s.mu.RLock()
		if s.closed {
			s.mu.RUnlock()
			return ErrClosed
		}
		for i := range n {
			vals[i] = s.m[keys[i]]
		}
		s.mu.RUnlock()
		for i := range n {
			if vals[i] == nil {
				continue // deleted since the index was built
			}
			kb = append(kb[:0], keys[i]...)
			if !fn(kb, vals[i]) {
				return nil
			}
		}
		keys = keys[n:]
	}
	return nil
}

// DeleteRange implements Store.
func (s *Memory) DeleteRange(start, end []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	for k, v := range s.m {
		if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
			s.size -= uint64(len(k) + len(v))
			delete(s.m, k)
		}
	}
	s.checkIndexBloat()
	return nil
}

// ApproxSize implements Store: the bytes of live keys and values.
func (s *Memory) ApproxSize() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.size
}

// Len returns the number of live keys.
func (s *Memory) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.m)
}

// Close implements Store.
func (s *Memory) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.m, s.sorted, s.pending, s.size = nil, nil, nil, 0
	return nil
}
