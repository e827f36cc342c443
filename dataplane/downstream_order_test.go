package dataplane

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
)

// orderFixture: a sink task downstream of the two tasks of "count", which
// the test plays: it hands the sink their frames as if they had arrived.
type orderFixture struct {
	w     *Worker
	dep   control.Deployment
	tasks map[string]*task
	sink  *task
	mu    sync.Mutex
	got   []int64 // Offsets in the order the sink took them
}

func newOrderFixture(t *testing.T) *orderFixture {
	t.Helper()
	fx := &orderFixture{}
	q := NewQuery("downstream-order")
	q.Source("source", 1).Map("count", func(r Record) Record { return r }).Parallelism(2).
		SinkFunc("sink", func(recs []Record) error {
			fx.mu.Lock()
			defer fx.mu.Unlock()
			for _, r := range recs {
				fx.got = append(fx.got, r.Offset)
			}
			return nil
		})
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	dep := control.Deployment{Job: control.JobSpec{JobID: "downstream-order", Operators: ops, NumBuckets: kltCkptBuckets, BatchSize: 100}, Epoch: 1}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: make([]int, kltCkptBuckets)})
	}
	fx.w, fx.dep, fx.tasks = w, dep, createTasks(t, w, dep)
	fx.sink = fx.tasks["sink-0"]
	t.Cleanup(func() {
		for _, tk := range w.tasks {
			_ = tk.stop(context.Background())
		}
	})
	return fx
}

func (fx *orderFixture) take(t *testing.T, f *wire.Frame) {
	t.Helper()
	f.JobID, f.ToTask = "downstream-order", "sink-0"
	if err := fx.sink.handleFrame(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

func data(from string, offsets ...int64) *wire.Frame {
	f := &wire.Frame{Kind: wire.FrameData, FromTask: from}
	for _, o := range offsets {
		f.Records = append(f.Records, Record{Key: []byte("stream-1"), Offset: o})
	}
	return f
}

func handedOff(from string, epoch int64) *wire.Frame {
	return &wire.Frame{Kind: wire.FrameHandedOff, FromTask: from, Records: []Record{{Key: []byte(kltEpochKey), Offset: epoch}}}
}

func orderAfter(from, old string, epoch int64) *wire.Frame {
	return &wire.Frame{Kind: wire.FrameOrderAfter, FromTask: from, Records: []Record{{Key: []byte(old), Offset: epoch}}}
}

// A downstream task takes a new owner's output only after what the old
// owner sent before its handoff, whichever lane delivers first; an old
// owner's earlier handoff releases nothing, one that came first holds
// nothing, and a checkpoint waits while output is held.
func TestDownstreamOrdersNewOwnerAfterHandoff(t *testing.T) {
	fx := newOrderFixture(t)
	view := fx.sink.view.Load()

	fx.take(t, handedOff("count-0", 1)) // a previous reconfiguration's
	fx.take(t, orderAfter("count-1", "count-0", 2))
	fx.take(t, data("count-1", 3, 4)) // overtook count-0's lane
	fx.take(t, &wire.Frame{Kind: wire.FrameWatermark, FromTask: "count-1", Records: []Record{{EventTime: 5, Offset: -1}}})
	fx.take(t, data("count-1", 5))
	fx.take(t, data("count-0", 1, 2))
	if why := fx.sink.migrationInProgress(view, "ckpt-1"); why == "" {
		t.Fatal("a checkpoint part was allowed while a new owner's output is held")
	}
	fx.take(t, handedOff("count-0", 1)) // a repeat: still the old epoch
	if want := []int64{1, 2}; !slices.Equal(fx.got, want) {
		t.Fatalf("sink took %v before count-0's handoff marker, want %v", fx.got, want)
	}
	fx.take(t, handedOff("count-0", 2))
	if want := []int64{1, 2, 3, 4, 5}; !slices.Equal(fx.got, want) {
		t.Fatalf("sink took %v, want %v", fx.got, want)
	}
	if why := fx.sink.migrationInProgress(view, "ckpt-2"); why != "" {
		t.Fatalf("checkpoint refused after the release: %s", why)
	}

	// The marker first: the order it satisfies holds nothing.
	fx.take(t, handedOff("count-1", 3))
	fx.take(t, orderAfter("count-0", "count-1", 3))
	fx.take(t, data("count-0", 6))
	if want := []int64{1, 2, 3, 4, 5, 6}; !slices.Equal(fx.got, want) {
		t.Fatalf("sink took %v, want %v", fx.got, want)
	}
}

// A handoff marker waits behind its sender's held frames: count-1 took
// buckets from count-0 and handed them on to count-2 while its own output
// was still held, so count-2's output must follow count-1's held output,
// not only count-1's marker.
func TestHandedOffMarkerWaitsBehindItsSender(t *testing.T) {
	fx := newOrderFixture(t)
	fx.take(t, orderAfter("count-1", "count-0", 2))
	fx.take(t, data("count-1", 2))
	fx.take(t, handedOff("count-1", 3))
	fx.take(t, orderAfter("count-2", "count-1", 3))
	fx.take(t, data("count-2", 3))
	if len(fx.got) != 0 {
		t.Fatalf("sink took %v before count-0's handoff marker", fx.got)
	}
	fx.take(t, data("count-0", 1))
	fx.take(t, handedOff("count-0", 2))
	if want := []int64{1, 2, 3}; !slices.Equal(fx.got, want) {
		t.Fatalf("sink took %v, want %v", fx.got, want)
	}
}

// The old owner sends its handoff marker to every downstream task behind
// its earlier output, and the new owner, once it installed the handoff
// (before it can take any record of the buckets it gained), its order
// marker naming the old owner and the handoff's epoch.
func TestHandoffSendsDownstreamMarkers(t *testing.T) {
	fx := newTimerFixture(t, "handoff-markers", false)
	t0 := int64(1_700_000_000) * int64(time.Second)
	var recs []Record
	for _, k := range keysInBucket(1, 3) {
		recs = append(recs, Record{Key: []byte(k), EventTime: t0})
	}
	fx.records(t, 0, recs)
	fx.watermark(t, t0+2*int64(time.Second)) // win-0's window fires into the sink's inbox
	for i := range recs {
		recs[i].EventTime = t0 + 3*int64(time.Second)
	}
	fx.records(t, 0, recs)
	if err := fx.win[0].handleSettled(context.Background(), &wire.Frame{Kind: wire.FrameWatermark, JobID: fx.dep.Job.JobID, FromTask: "source-0", ToTask: "win-0", Records: []Record{{EventTime: t0 + 4*int64(time.Second), Partition: -1}}}); err != nil {
		t.Fatal(err)
	}
	fx.handOver(t, []int{1})
	var kinds []string
	for len(fx.sink.inbox) > 0 {
		f := <-fx.sink.inbox
		fx.sink.taken(f)
		if f.Kind == wire.FrameWatermark {
			continue
		}
		kinds = append(kinds, f.FromTask+" "+f.Kind.String())
		switch f.Kind {
		case wire.FrameHandedOff:
			if f.Records[0].Offset != 2 {
				t.Fatalf("win-0 handed off at epoch %d, want 2", f.Records[0].Offset)
			}
		case wire.FrameOrderAfter:
			if string(f.Records[0].Key) != "win-0" || f.Records[0].Offset != 2 {
				t.Fatalf("win-1 orders after %s at %d, want win-0 at 2", f.Records[0].Key, f.Records[0].Offset)
			}
		}
	}
	want := []string{"win-0 data", "win-0 handed-off", "win-1 order-after"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("the sink received %v, want %v", kinds, want)
	}
}

// A new owner orders its output only at the downstream tasks the old owner
// marked: one the old owner did not mark (made by a downstream scale-out it
// had not learnt of, perhaps before a scale-in removed it) waits for
// nothing, and one it marked that the new owner learns of later gets the
// new owner's marker ahead of the first record it sends there.
func TestNewOwnerOrdersWhereOldOwnerMarked(t *testing.T) {
	ctx := context.Background()
	fx := newOrderFixture(t)
	w, dep := fx.w, fx.dep
	n, sink0 := fx.tasks["count-1"], fx.sink
	inbox := func(tk *task) []string {
		var got []string
		for len(tk.inbox) > 0 {
			f := <-tk.inbox
			tk.taken(f)
			got = append(got, f.FromTask+" "+f.Kind.String())
		}
		return got
	}

	// count-0 marked no downstream task (a sink task it never knew).
	if err := n.sendOrderAfter(ctx, "count-0", 2, nil); err != nil {
		t.Fatal(err)
	}
	if got := inbox(sink0); len(got) != 0 {
		t.Fatalf("sink-0, not marked by count-0, received %v", got)
	}

	// count-0 marked sink-0 and sink-1; count-1 knows only sink-0 yet.
	if err := n.sendOrderAfter(ctx, "count-0", 3, []string{"sink-0", "sink-1"}); err != nil {
		t.Fatal(err)
	}
	if got, want := inbox(sink0), []string{"count-1 order-after"}; !slices.Equal(got, want) {
		t.Fatalf("sink-0 received %v, want %v", got, want)
	}

	// The sink scales out; every bucket goes to sink-1.
	next := dep
	next.Tasks = append(slices.Clone(dep.Tasks), control.TaskRef{ID: "sink-1", Operator: "sink", Index: 1, WorkerID: "w1"})
	next.Routing = slices.Clone(dep.Routing)
	for i, rt := range next.Routing {
		if rt.Operator == "sink" {
			b := make([]int, kltCkptBuckets)
			for j := range b {
				b[j] = 1
			}
			next.Routing[i] = control.RoutingTable{Operator: "sink", Epoch: 2, Buckets: b}
		}
	}
	next.Epoch = 2
	sink1, err := w.createTask(next, control.TaskRef{ID: "sink-1", Operator: "sink", Index: 1, WorkerID: "w1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.tasks[sink1.key()] = sink1
	n.mergeView(next)
	for range 2 {
		if err := n.handleFrame(ctx, &wire.Frame{Kind: wire.FrameData, JobID: dep.Job.JobID, FromTask: "source-0", ToTask: "count-1",
			Records: []Record{{Key: []byte("k"), Offset: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := inbox(sink1), []string{"count-1 order-after", "count-1 data", "count-1 data"}; !slices.Equal(got, want) {
		t.Fatalf("sink-1 received %v, want %v", got, want)
	}
	if len(n.pendingOrders) != 0 {
		t.Fatalf("count-1 still owes %v", n.pendingOrders)
	}
}
