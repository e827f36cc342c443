// Package budget owns the amount bound of the dataplane's queues: a bound
// on what waits between a sender and its receiver measured in bytes or
// records rather than in queued items.
//
// The queues between tasks were bounded in frames only, and a frame holds
// anything from one record to a whole batch of 2 KB values, so a full
// queue could hold seconds of a slow task's work. A reconfiguration waits
// behind all of it: an old owner learns that no record routed the old way
// can still reach it only once it has processed every record queued ahead
// of the route barrier. Bounding the amount keeps that wait short and
// leaves the backlog where it can be seen, in the source's Kafka lag.
package budget

import (
	"context"
	"sync"
)

// Budget admits items while the amount they hold is below its limit. An
// item is admitted whenever the amount queued is below the limit, however
// large the item, so one item larger than the whole budget still passes
// (alone) and nothing waits forever for room that cannot come.
type Budget struct {
	limit int

	mu      sync.Mutex
	used    int
	waiting int // Acquires waiting for room
	// room is closed, and replaced, when Release lowers used while an
	// Acquire waits, so every waiter looks again; with none waiting (the
	// common case: a frame per release) nothing is allocated.
	room chan struct{}
}

// New returns a budget of limit; a limit below 1 is 1 (one item at a
// time), the least that still lets items through.
func New(limit int) *Budget {
	return &Budget{limit: max(limit, 1), room: make(chan struct{})}
}

// Acquire waits until the amount held is below the limit, then adds n.
// It returns false, having added nothing, when stop is closed first (a
// receiver that went away), and ctx's error when ctx ends first.
func (b *Budget) Acquire(ctx context.Context, n int, stop <-chan struct{}) (bool, error) {
	for {
		b.mu.Lock()
		if b.used < b.limit {
			b.used += n
			b.mu.Unlock()
			return true, nil
		}
		room := b.room
		b.waiting++
		b.mu.Unlock()
		var err error
		stopped := false
		select {
		case <-room:
		case <-stop:
			stopped = true
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		b.waiting--
		b.mu.Unlock()
		if stopped || err != nil {
			return false, err
		}
	}
}

// Release returns n that an Acquire added.
func (b *Budget) Release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		// A release without its acquire is a bug of the caller; keeping
		// the count at zero keeps the bound working for everyone else.
		b.used = 0
	}
	if b.waiting > 0 {
		close(b.room)
		b.room = make(chan struct{})
	}
	b.mu.Unlock()
}

// Used is the amount held now.
func (b *Budget) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Waiting is how many Acquires wait for room now.
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// Limit is the bound the budget was made with.
func (b *Budget) Limit() int { return b.limit }
