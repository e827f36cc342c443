package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/exchange"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
)

// pollUntil polls cond until it holds, failing the test at the deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdFixture: up-0 (a running stateless task) sends every record to
// count-1, a new owner whose gate holds up-0's records until count-0, the
// old owner, says up-0 is drained. The test runs count-1's goroutine
// itself; count-1 notes the order in which it processes each key's
// records.
type holdFixture struct {
	w        *Worker
	job      string
	up, nw   *task
	mu       sync.Mutex
	seen     map[string][]int64 // key → Offsets in processing order
	gained   []int
	keys     []string
	valueLen int
}

func newHoldFixture(t *testing.T, bound int) *holdFixture {
	t.Helper()
	fx := &holdFixture{job: "route-hold", seen: map[string][]int64{}, valueLen: 1000}
	q := NewQuery(fx.job)
	q.Source("source", 1).Map("up", func(r Record) Record { return r }).
		KeyedStateful("count", []string{"count"}, func(r Record, _ *State, _ Emit) error {
			fx.mu.Lock()
			fx.seen[string(r.Key)] = append(fx.seen[string(r.Key)], r.Offset)
			fx.mu.Unlock()
			return nil
		}).Parallelism(2).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	fx.w = &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	spec := control.JobSpec{JobID: fx.job, Operators: ops, NumBuckets: kltCkptBuckets, BatchSize: 100, StateBackend: "pebble",
		Params: map[string]string{control.ParamReconfigHoldBytes: strconv.Itoa(bound)}}
	dep := control.Deployment{Job: spec, Epoch: 2}
	fx.gained = []int{1, 3, 5}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		table := make([]int, kltCkptBuckets)
		if op.Name == "count" {
			for _, b := range fx.gained {
				table[b] = 1 // routed to count-1 already: upstreams switched
			}
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 2, Buckets: table})
	}
	var made []*task
	for _, ref := range dep.Tasks {
		if ref.Operator == "source" {
			continue
		}
		tk, err := fx.w.createTask(dep, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		fx.w.tasks[tk.key()] = tk
		made = append(made, tk)
		switch ref.ID {
		case "up-0":
			fx.up = tk
		case "count-1":
			fx.nw = tk
		}
	}
	t.Cleanup(func() {
		for _, tk := range made {
			_ = tk.stop(context.Background())
		}
	})
	gained := map[int]bool{}
	for _, b := range fx.gained {
		gained[b] = true
		fx.keys = append(fx.keys, keysInBucket(b, 4)...)
	}
	fx.nw.openGate("count-0", gained)
	return fx
}

// frame is a batch of one record per key, the n-th of each key.
func (fx *holdFixture) frame(from, to string, n int64) *wire.Frame {
	f := &wire.Frame{Kind: wire.FrameData, JobID: fx.job, FromTask: from, ToTask: to}
	for _, k := range fx.keys {
		f.Records = append(f.Records, Record{Key: []byte(k), Value: make([]byte, fx.valueLen), Offset: n})
	}
	return f
}

// pump runs count-1's goroutine's part for every frame waiting in its inbox.
func (fx *holdFixture) pump(t *testing.T) {
	t.Helper()
	for {
		select {
		case f := <-fx.nw.inbox:
			fx.nw.taken(f) // as nextFrame does: the frame leaves the inbox
			if err := fx.nw.handleSettled(context.Background(), f); err != nil {
				t.Fatal(err)
			}
		default:
			return
		}
	}
}

// TestRouteDrainHoldsSenders fills a new owner's holding area past its
// bound: the sender is held (it stops taking input, and the holding area
// stops growing) yet still runs a control request; once the old owner has
// drained it, every record is processed, each key's in order — the old
// owner's forwarded records first.
func TestRouteDrainHoldsSenders(t *testing.T) {
	const bound = control.MinReconfigHoldBytes
	fx := newHoldFixture(t, bound)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fx.up.start(ctx)

	const forwarded, direct = 3, 400 // per key
	fed := make(chan int, 1)
	// The feeder stops while the control request below is on its way, so
	// what up-0 sends before running it is what was ahead of it, not what
	// a feeder that wins the race for inbox slots adds.
	var feedPaused atomic.Bool
	feedResume := make(chan struct{})
	go func() { // the source side: blocks once up-0 stops taking frames
		n := 0
		defer func() { fed <- n }()
		for i := int64(forwarded); i < forwarded+direct; i++ {
			if feedPaused.Load() {
				select {
				case <-feedResume:
				case <-ctx.Done():
					return
				}
			}
			select {
			case fx.up.inbox <- fx.frame("source-0", "up-0", i):
				n++
			case <-ctx.Done():
				return
			}
		}
	}()
	frameBytes := recordsBytes(fx.frame("", "", 0).Records)
	pollUntil(t, "up-0 waits on count-1's hold", func() bool {
		fx.pump(t)
		return fx.w.holds.waiting.Load() == 1 && len(fx.nw.inbox) == 0
	})
	g := fx.nw.gates
	// What was on its way when the hold came: count-1's inbox and the
	// frame up-0 was delivering, on top of the frame that crossed the
	// bound (up to a whole frame past it).
	slack := (cap(fx.nw.inbox) + 2) * frameBytes
	if g.bytes < bound || g.bytes > bound+slack {
		t.Fatalf("%d bytes held, want between the bound %d and %d", g.bytes, bound, bound+slack)
	}
	if _, ok := g.paused["up-0"]; !ok {
		t.Fatalf("count-1 holds %d bytes but not up-0", g.bytes)
	}
	held := g.bytes
	in := fx.up.stats.recordsIn.Load()
	if total := uint64(direct * len(fx.keys)); in >= total {
		t.Fatalf("up-0 took all %d records despite the hold", in)
	}

	// A held task still runs its control requests (its route barrier is
	// one): it sends on until it has.
	ran := make(chan error, 1)
	feedPaused.Store(true)
	go func() {
		ran <- fx.w.onTaskGoroutines(ctx, fx.job, []string{"up-0"}, func(context.Context, *task) error { return nil })
	}()
	for done := false; !done; {
		select {
		case err := <-ran:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		default:
			fx.pump(t)
			time.Sleep(time.Millisecond)
		}
	}
	// Once it has run the request it is held again: what the feeder sends
	// from here waits in up-0.
	feedPaused.Store(false)
	close(feedResume)
	pollUntil(t, "up-0 waits again", func() bool {
		fx.pump(t)
		return fx.w.holds.waiting.Load() == 1 && len(fx.nw.inbox) == 0
	})
	// It sent what was ahead of the request: the frame it was delivering,
	// its inbox and the frame the feeder had waiting for room there.
	if ahead := (cap(fx.up.inbox) + 2) * frameBytes; g.bytes > held+ahead {
		t.Fatalf("after the control request %d bytes held, want at most %d", g.bytes, held+ahead)
	}

	// The old owner forwards its records of the keys, then says up-0 and
	// every other sender are drained.
	for i := int64(0); i < forwarded; i++ {
		if err := fx.nw.handleSettled(ctx, fx.frame("count-0", "count-1", i)); err != nil {
			t.Fatal(err)
		}
	}
	drained := &wire.Frame{Kind: wire.FrameRouteDrained, JobID: fx.job, FromTask: "count-0", ToTask: "count-1",
		Records: []Record{{Key: []byte("up-0"), Offset: -1}, {Key: []byte(drainAll), Offset: -1}}}
	if err := fx.nw.handleSettled(ctx, drained); err != nil {
		t.Fatal(err)
	}
	if fx.w.holds.active.Load() != 0 {
		t.Fatal("up-0 is still held after its old owner drained it")
	}
	want := forwarded + direct
	pollUntil(t, "count-1 processed every record", func() bool {
		fx.pump(t)
		fx.mu.Lock()
		defer fx.mu.Unlock()
		for _, k := range fx.keys {
			if len(fx.seen[k]) < want {
				return false
			}
		}
		return true
	})
	if n := <-fed; n != direct {
		t.Fatalf("%d of %d frames fed", n, direct)
	}
	fx.mu.Lock()
	defer fx.mu.Unlock()
	for _, k := range fx.keys {
		got := fx.seen[k]
		if len(got) != want || !slices.IsSorted(got) || got[0] != 0 || got[len(got)-1] != int64(want-1) {
			t.Fatalf("key %s: %d records processed, in order %v, want 0..%d once each", k, len(got), slices.IsSorted(got), want-1)
		}
	}
	if g.n != 0 || g.bytes != 0 || len(g.paused) != 0 {
		t.Fatalf("after the drain: %d records, %d bytes held, %d senders held", g.n, g.bytes, len(g.paused))
	}
}

// TestHoldSignals: a hold that comes over the exchange is put and lifted
// by generation, and a stale signal changes nothing.
func TestHoldSignals(t *testing.T) {
	w := &Worker{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	k := holdKey{job: "j", sender: "up-0", receiver: "count-1"}
	steps := []struct {
		gen    uint64
		signal string
		held   bool
	}{
		{5, holdPause, true},
		{4, holdRelease, true}, // older than the pause
		{6, holdPause, true},   // already held
		{7, holdRelease, false},
		{6, holdPause, false}, // a resent pause the release overtook
		{9, holdPause, true},
	}
	for i, s := range steps {
		f := &wire.Frame{Kind: wire.FrameCredit, JobID: k.job, FromTask: k.receiver, ToTask: k.sender, BarrierID: s.signal, Seq: s.gen}
		if err := w.deliverLocal(context.Background(), f); err != nil {
			t.Fatal(err)
		}
		if held := w.holds.released(k) != nil; held != s.held || int(w.holds.active.Load()) != map[bool]int{false: 0, true: 1}[s.held] {
			t.Fatalf("step %d (%s %d): held %v, %d active; want %v", i, s.signal, s.gen, held, w.holds.active.Load(), s.held)
		}
	}
	w.holds.forgetJob("j")
	if w.holds.released(k) != nil || w.holds.active.Load() != 0 {
		t.Fatal("a hold outlived its job")
	}
}

// TestHandoffQueueBounded: an old owner's queue of forwarded frames takes
// frames up to its bound, then makes the next wait — markers never wait —
// until the handoff takes the queue; nothing is lost or reordered, a
// finished queue refuses frames, and a waiting offer ends with its task.
func TestHandoffQueueBounded(t *testing.T) {
	const limit = 64 << 10
	q := &handoffQueue{limit: limit}
	ctx := context.Background()
	mk := func(i int) *wire.Frame {
		return &wire.Frame{Kind: wire.FrameData, Records: []Record{{Key: []byte(fmt.Sprint(i)), Value: make([]byte, 10<<10)}}}
	}
	var order []int
	i := 0
	for q.bytes < limit {
		if ok, err := q.offer(ctx, mk(i)); !ok || err != nil {
			t.Fatalf("offer %d below the bound: %v, %v", i, ok, err)
		}
		order = append(order, i)
		i++
	}
	if ok, err := q.offer(ctx, &wire.Frame{Kind: wire.FrameRouteDrained}); !ok || err != nil {
		t.Fatalf("a marker waited at the bound: %v, %v", ok, err)
	}
	order = append(order, -1)
	next := i
	offered := make(chan error, 1)
	go func() {
		ok, err := q.offer(ctx, mk(next))
		if err == nil && !ok {
			err = errors.New("refused")
		}
		offered <- err
	}()
	pollUntil(t, "the offer past the bound waits", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.waiting == 1
	})
	q.mu.Lock()
	if n := len(q.pending); n != len(order) || q.bytes > limit+recordsBytes(mk(0).Records) {
		q.mu.Unlock()
		t.Fatalf("%d frames, %d bytes queued while an offer waits; want %d frames, at most a frame past %d", n, q.bytes, len(order), limit)
	}
	q.mu.Unlock()
	var got []int
	take := func() int {
		batch := q.take()
		for _, f := range batch {
			if f.Kind != wire.FrameData {
				got = append(got, -1)
				continue
			}
			n, _ := strconv.Atoi(string(f.Records[0].Key))
			got = append(got, n)
		}
		return len(batch)
	}
	take()
	if err := <-offered; err != nil {
		t.Fatal(err)
	}
	order = append(order, next)
	for take() > 0 {
	}
	if !slices.Equal(got, order) {
		t.Fatalf("frames came out as %v, want %v", got, order)
	}
	if ok, _ := q.offer(ctx, mk(99)); ok {
		t.Fatal("a finished queue took a frame")
	}

	// A waiting offer ends with the task's context.
	q2 := &handoffQueue{limit: 1}
	if ok, _ := q2.offer(ctx, mk(0)); !ok {
		t.Fatal("an empty queue refused a frame")
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { offered <- func() error { _, err := q2.offer(cctx, mk(1)); return err }() }()
	pollUntil(t, "the second offer waits", func() bool {
		q2.mu.Lock()
		defer q2.mu.Unlock()
		return q2.waiting == 1
	})
	cancel()
	if err := <-offered; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting offer ended with %v, want context.Canceled", err)
	}
}

// TestHoldAcrossWorkers: a new owner's hold on, and release of, a sender
// on another worker travel through the credit returner and the exchange,
// and the sender's worker applies them.
func TestHoldAcrossWorkers(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sender := &Worker{opts: Options{ID: "w2"}, log: log}
	l, err := exchange.StartLoopback(func(f *wire.Frame) {
		if err := sender.deliverLocal(context.Background(), f); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &Worker{opts: Options{ID: "w1"}, log: log, peers: exchange.NewPeers(ctx, log, nil)}
	go w.returnCredits(ctx)
	n := &task{w: w, jobID: "j", id: "count-1"}
	up := control.TaskRef{ID: "up-0", WorkerID: "w2", DataAddr: l.Addr()}
	k := holdKey{job: "j", sender: "up-0", receiver: "count-1"}
	n.signalSender(up, true)
	pollUntil(t, "the sender's worker holds up-0", func() bool { return sender.holds.released(k) != nil })
	n.signalSender(up, false)
	pollUntil(t, "the sender's worker lifts the hold", func() bool { return sender.holds.released(k) == nil })
	if sender.holds.active.Load() != 0 {
		t.Fatalf("%d holds active after the release", sender.holds.active.Load())
	}
}
