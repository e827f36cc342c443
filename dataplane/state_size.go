package dataplane

import (
	"sync"
	"time"
)

// stateSizeEvery is how often a task's state size is read from its store
// at most: status requests can come several times a second (the warm-up
// progress, koala ui, the activities' polls), and a Pebble store's size
// comes from its metrics, which take Pebble's locks.
const stateSizeEvery = time.Second

// stateSize keeps a keyed task's last state size reading. It is read by
// status requests only, never on the record path.
type stateSize struct {
	mu    sync.Mutex
	at    time.Time
	bytes uint64
}

// get returns the state size, reading it with read when the last reading
// is older than stateSizeEvery at now.
func (s *stateSize) get(now time.Time, read func() uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at.IsZero() || now.Sub(s.at) >= stateSizeEvery {
		s.bytes, s.at = read(), now
	}
	return s.bytes
}
