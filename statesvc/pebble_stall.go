package statesvc

import (
	"sync"
	"time"
)

// memTableStopWrites is how many memtables' worth of writes may queue for
// flushing before Pebble stops writes (its default is 2: the mutable one
// and one flushing). A keyed task writes its dirty values back on its own
// goroutine, so a stop holds up the task's records until the flush ends.
// With two, q6*'s task stalled before the trigger in 9 of 18 runs on a
// saturated machine (in one, its two lowest pre-scale seconds: 48 and
// 49 K against a 115 K mean); with four, in none of 8 (EXPERIMENTS.md,
// "The fetch pipeline's depth").
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
