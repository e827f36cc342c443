package dataplane

import (
	"context"
	"fmt"
	"testing"
	"time"

	"koala/dataplane/wire"
	"koala/statesvc"
)

// TestStopDeliversHandoffQueue: an old owner's handoff forwards records to
// the new owner through a queue that waits for room in the new owner's
// inbox, on the old owner's context. Stopping the old owner (a removed
// task after a scale-in) while that queue still waits must not cancel it:
// the queued records, and the route-drained marker that opens the new
// owner's gate, would be lost (found by the Nexmark exactness matrix: a
// lazy scale-in whose drain then hung on the held end of stream).
func TestStopDeliversHandoffQueue(t *testing.T) {
	c := newKLTCkptCluster(t, t.TempDir())
	old, next := c.tasks["count-0"], c.tasks["count-1"]
	next.inbox = make(chan *wire.Frame, 1) // a busy new owner: room for one frame
	moved := []int{0, 2}
	var keys []string
	for i := 0; len(keys) < 20; i++ {
		k := fmt.Sprintf("k%d", i)
		if b := statesvc.BucketOf([]byte(k), kltCkptBuckets); b == 0 || b == 2 {
			keys = append(keys, k)
		}
	}
	old.start(context.Background())
	delete(c.tasks, "count-0") // stopped below
	onTask := func(fn func(ctx context.Context, t *task) error) {
		t.Helper()
		item := &controlItem{fn: fn, reply: make(chan error, 1)}
		old.inbox <- &wire.Frame{Kind: wire.FrameControl, Ctl: item}
		if err := <-item.reply; err != nil {
			t.Fatal(err)
		}
	}
	dep := c.handoffTo(moved)
	next.mergeView(dep) // prepare-owners
	// The new owner's one slot is taken, so the handoff's send waits and
	// everything forwarded meanwhile goes to its queue: without this, a
	// handoff that finished first would leave the old owner's goroutine
	// blocked delivering straight to the full inbox.
	next.inbox <- &wire.Frame{Kind: wire.FrameWatermark, FromTask: "filler", Records: []Record{{Offset: -1}}}
	onTask(func(ctx context.Context, tk *task) error { return tk.handoff(ctx, dep, "r1", false, false) })
	// Records routed the old way reach the old owner one frame each; it
	// forwards them behind the handoff's end, which fills the inbox.
	for _, k := range keys {
		old.inbox <- &wire.Frame{Kind: wire.FrameData, JobID: c.dep.Job.JobID, FromTask: "source-0", ToTask: old.id, Records: []Record{{Key: []byte(k)}}}
	}
	onTask(func(context.Context, *task) error { return nil }) // every record handled
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- c.w.stopTasks(ctx, c.dep.Job.JobID, []string{old.id})
	}()
	time.Sleep(100 * time.Millisecond) // the stop request is in before the new owner makes room
	forwarded := 0
	deadline := time.After(10 * time.Second)
	for forwarded < len(keys) {
		select {
		case f := <-next.inbox:
			next.taken(f) // as nextFrame does: the frame leaves the inbox
			if f.Kind == wire.FrameData {
				forwarded += len(f.Records)
			}
		case <-deadline:
			t.Fatalf("the new owner received %d of the %d forwarded records: the stop dropped the rest", forwarded, len(keys))
		}
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}
