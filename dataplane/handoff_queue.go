package dataplane

import (
	"context"
	"sync"

	"koala/dataplane/wire"
)

// handoffQueue holds the frames an old owner forwards to a new owner while
// the handoff's lookup entries are still being sent: the new owner must
// have them before it processes any record of the buckets. Listing and
// sending the entries of a large state takes a while, and the old owner
// keeps forwarding meanwhile, so the queue is bounded (ReconfigHoldMaxBytes
// of records): at the bound the old owner's task goroutine waits until
// the handoff has sent the entries and takes the queue, which backs up
// into its inbox and its upstreams like any slow task. The handoff's
// sending does not depend on the old owner's goroutine (it reads the store
// and writes to the new owner), and a task never both gives and gains
// buckets in one reconfiguration (workflows/plan; Plan.CheckDirections
// refuses a plan that would), so the wait ends.
type handoffQueue struct {
	mu      sync.Mutex
	pending []*wire.Frame
	bytes   int // recordsBytes of pending
	limit   int // 0: unbounded
	done    bool
	// room is closed when the queue is taken, for offers waiting on the
	// bound; waiting counts them.
	room    chan struct{}
	waiting int
}

// offer queues f unless the handoff finished; it reports whether it did. A
// data frame waits while the queue holds limit bytes of records; markers
// and barriers never wait (they hold no records, and order is kept since
// everything goes through the one queue).
func (q *handoffQueue) offer(ctx context.Context, f *wire.Frame) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.done && f.Kind == wire.FrameData && q.limit > 0 && q.bytes >= q.limit {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.waiting++
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
		}
		q.mu.Lock()
		q.waiting--
		if err := ctx.Err(); err != nil {
			return false, err
		}
	}
	if q.done {
		return false, nil
	}
	q.pending = append(q.pending, f)
	q.bytes += recordsBytes(f.Records)
	return true, nil
}

// take empties the queue and returns what it held, in order; an empty
// queue is finished, and later offers are refused (the owner sends
// directly).
func (q *handoffQueue) take() []*wire.Frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.pending
	q.pending, q.bytes = nil, 0
	if len(batch) == 0 {
		q.done = true
	}
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
	return batch
}
