package statesvc

import (
	"sync"
	"time"
)

// memTableStopWrites is how many memtables' worth of writes may queue for
// flushing before Pebble stops writes (its default is 2: the mutable one
// and one flushing). A keyed task writes its dirty values back on its own
// goroutine, so a stop stalls the task's records for as long as the flush
// takes; with two, a flush slowed by a saturated machine stopped q6*'s
// task for whole seconds of its pre-scale run (EXPERIMENTS.md, "Write
// stalls").
const memTableStopWrites = 4

// stallClock times Pebble's write stalls for the log: Pebble calls begin
// and end from its commit pipeline, one stall at a time.
type stallClock struct {
	mu    sync.Mutex
	since time.Time
}

func (c *stallClock) begin() {
	c.mu.Lock()
	c.since = time.Now()
	c.mu.Unlock()
}

// end returns how long the stall lasted (0 if its beginning was missed).
func (c *stallClock) end() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		return 0
	}
	d := time.Since(c.since)
	c.since = time.Time{}
	return d
}
