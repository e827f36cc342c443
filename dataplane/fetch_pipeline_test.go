package dataplane

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// TestFetchesOverlapAcrossBatches: the new owner takes its next batch
// while the fetch of an earlier one is out, and a watermark between them
// does not make it wait either. The old owner's store holds the first
// fetch until the second batch's fetch has reached it too; a task that
// waited for each fetch before its next batch (or before the watermark)
// would never send the second, and the first would time out. The
// watermark goes on only after the records before it; a later record of
// the first fetch's key waits behind it (the tail); and a barrier that
// follows finds every record before it processed: each key's state and
// output keep the records' order.
func TestFetchesOverlapAcrossBatches(t *testing.T) {
	old, nw, sink, job := seqFixture(t)
	keys := keysInBucket(1, 4)
	r1, r2, l1, l2 := keys[0], keys[1], keys[2], keys[3]
	if err := old.keyed.store.MultiPut([]statesvc.KV{
		{Key: old.keyed.stateKey("seq", []byte(r1)), Value: []byte("0")},
		{Key: old.keyed.stateKey("seq", []byte(r2)), Value: []byte("1")},
	}); err != nil {
		t.Fatal(err)
	}
	nw.keyed.owners.Store("seq-0", control.TaskRef{ID: "seq-0", WorkerID: "w1"})
	nw.keyed.klt.Add(1, []byte(r1), "seq-0")
	nw.keyed.klt.Add(1, []byte(r2), "seq-0")
	owner := &hookStore{Store: old.keyed.store}
	old.keyed.store = owner
	overlapped := make(chan bool, 1)
	owner.onGet = func(n int) {
		if n != 1 {
			return
		}
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			owner.mu.Lock()
			gets := owner.gets
			owner.mu.Unlock()
			if gets >= 2 {
				overlapped <- true
				return
			}
		}
		overlapped <- false
	}

	batch := func(kvs ...string) *wire.Frame {
		f := &wire.Frame{Kind: wire.FrameData, JobID: job.JobID, FromTask: "source-0", ToTask: nw.id}
		for i := 0; i < len(kvs); i += 2 {
			f.Records = append(f.Records, Record{Key: []byte(kvs[i]), Value: []byte(kvs[i+1])})
		}
		return f
	}
	ctx := context.Background()
	const wm = 1000
	for _, f := range []*wire.Frame{
		batch(r1, "a", l1, "b"),
		{Kind: wire.FrameWatermark, JobID: job.JobID, FromTask: "source-0", ToTask: nw.id, Records: []Record{{EventTime: wm}}},
		batch(r2, "c", r1, "d", l1, "e"), // r1's record waits behind its fetch
		batch(r1, "f", l2, "g"),
	} {
		if err := nw.handleFrame(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if !<-overlapped {
		t.Fatal("the first batch's fetch was still out when the old owner gave up waiting for the second: batches waited for their fetches one by one")
	}
	// handleFrame, not handleSettled: the barrier itself must wait for the
	// held records.
	if err := nw.handleFrame(ctx, &wire.Frame{Kind: wire.FrameBarrier, JobID: job.JobID, FromTask: "source-0", ToTask: nw.id, BarrierID: "b1"}); err != nil {
		t.Fatal(err)
	}
	if n := nw.keyed.pipe.held; n != 0 {
		t.Fatalf("%d records still held after the barrier", n)
	}

	perKey := map[string][]string{}
	barrier, watermark := false, false
	for len(sink.inbox) > 0 {
		f := sink.taken(<-sink.inbox)
		switch f.Kind {
		case wire.FrameData:
			if barrier {
				t.Fatalf("records %v reached the sink after the barrier", f.Records)
			}
			for _, r := range f.Records {
				perKey[string(r.Key)] = append(perKey[string(r.Key)], string(r.Value))
			}
		case wire.FrameWatermark:
			if len(f.Records) == 1 && f.Records[0].EventTime == wm {
				watermark = true
				if len(perKey[r1]) == 0 || perKey[r1][0] != "a" || len(perKey[l1]) == 0 || perKey[l1][0] != "b" {
					t.Fatalf("the watermark reached the sink before the records sent ahead of it (got %v)", perKey)
				}
			}
		case wire.FrameBarrier:
			barrier = true
		}
	}
	if !watermark || !barrier {
		t.Fatalf("the sink got the watermark: %v, the barrier: %v; want both", watermark, barrier)
	}
	want := map[string][]string{r1: {"a", "d", "f"}, r2: {"c"}, l1: {"b", "e"}, l2: {"g"}}
	for k, w := range want {
		if !slices.Equal(perKey[k], w) {
			t.Errorf("the sink got %s's records %q, want %q", k, perKey[k], w)
		}
	}
	wantState := map[string]string{r1: "0adf", r2: "1c", l1: "be", l2: "g"}
	for k, w := range wantState {
		v, err := nw.keyed.store.MultiGet([][]byte{nw.keyed.stateKey("seq", []byte(k))})
		if err != nil {
			t.Fatal(err)
		}
		if string(v[0]) != w {
			t.Errorf("%s holds %q, want %q", k, v[0], w)
		}
	}
	if n := nw.keyed.klt.Len(); n != 0 {
		t.Errorf("%d lookup entries left after both keys were taken", n)
	}
}

// TestFetchPipelineHoldsAtMostItsBound: with every fetch held up, the
// task stops taking batches once the records waiting for fetches reach
// the bound, instead of holding more and more of them.
func TestFetchPipelineHoldsAtMostItsBound(t *testing.T) {
	old, nw, _, job := seqFixture(t)
	nw.keyed.pipe.maxHeld = 3
	keys := keysInBucket(1, 8)
	free := holdFetches(t, old, nw, keys, nil)

	handled := make(chan int, len(keys))
	go func() {
		defer close(handled)
		for i, k := range keys {
			f := &wire.Frame{Kind: wire.FrameData, JobID: job.JobID, FromTask: "source-0", ToTask: nw.id,
				Records: []Record{{Key: []byte(k), Value: []byte("x")}, {Key: []byte(k), Value: []byte("y")}}}
			if err := nw.handleFrame(context.Background(), f); err != nil {
				t.Error(err)
				return
			}
			handled <- i
		}
	}()
	// Two batches of two records are taken (the second starts at 2, under
	// the bound of 3); the third starts past it and waits for a fetch.
	for range 2 {
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatal("the first two batches were not taken with their fetches out")
		}
	}
	select {
	case i := <-handled:
		t.Fatalf("batch %d was taken with every fetch held up and 4 records waiting (bound 3)", i+1)
	case <-time.After(300 * time.Millisecond): // it waits, as it should
	}
	free()
	for range handled {
	}
	drainAndCheck(t, nw, keys, "xy")
}

// TestFetchesOutUpToDepth: right after a swap every key of the new owner
// is remote, so each batch is a segment of its own. The task goes on
// taking batches with fetchDepth of them out at the old owner together,
// and only the next one waits: it then stops filling its inbox, which is
// what holds up a source feeding both owners.
func TestFetchesOutUpToDepth(t *testing.T) {
	old, nw, _, job := seqFixture(t)
	nw.keyed.pipe.maxHeld = 10 * fetchDepth // the depth binds, not the records held
	keys := keysInBucket(1, fetchDepth+1)
	var waiting atomic.Int32
	free := holdFetches(t, old, nw, keys, func() { waiting.Add(1) })

	handled := make(chan int, len(keys))
	go func() {
		defer close(handled)
		for i, k := range keys {
			f := &wire.Frame{Kind: wire.FrameData, JobID: job.JobID, FromTask: "source-0", ToTask: nw.id,
				Records: []Record{{Key: []byte(k), Value: []byte("x")}}}
			if err := nw.handleFrame(context.Background(), f); err != nil {
				t.Error(err)
				return
			}
			handled <- i
		}
	}()
	for i := range fetchDepth {
		select {
		case <-handled:
		case <-time.After(10 * time.Second):
			t.Fatalf("batch %d was not taken with %d fetches out (depth %d)", i+1, i, fetchDepth)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for waiting.Load() < fetchDepth {
		if time.Now().After(deadline) {
			t.Fatalf("the old owner served %d fetches at once, want %d", waiting.Load(), fetchDepth)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case i := <-handled:
		t.Fatalf("batch %d was taken with %d fetches out (depth %d)", i+1, fetchDepth, fetchDepth)
	case <-time.After(300 * time.Millisecond): // it waits, as it should
	}
	free()
	for range handled {
	}
	drainAndCheck(t, nw, keys, "x")
}

// holdFetches makes keys (all of bucket 1) remote on old for nw and holds
// up every read of old's store, after calling onHold (if set), until the
// returned free is called or the test ends.
func holdFetches(t *testing.T, old, nw *task, keys []string, onHold func()) (free func()) {
	t.Helper()
	nw.keyed.owners.Store("seq-0", control.TaskRef{ID: "seq-0", WorkerID: "w1"})
	for _, k := range keys {
		nw.keyed.klt.Add(1, []byte(k), "seq-0")
	}
	owner := &hookStore{Store: old.keyed.store}
	old.keyed.store = owner
	release := make(chan struct{})
	var once sync.Once
	free = func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	owner.onGet = func(int) {
		if onHold != nil {
			onHold()
		}
		<-release
	}
	return free
}

// drainAndCheck processes every record nw holds and checks that each key's
// "seq" state is want.
func drainAndCheck(t *testing.T, nw *task, keys []string, want string) {
	t.Helper()
	if err := nw.outsideBatch(context.Background(), nw.drainFetches); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		v, err := nw.keyed.store.MultiGet([][]byte{nw.keyed.stateKey("seq", []byte(k))})
		if err != nil {
			t.Fatal(err)
		}
		if string(v[0]) != want {
			t.Errorf("%s holds %q, want %q", k, v[0], want)
		}
	}
}

// seqFixture: a source, a keyed "seq" operator of two tasks (each key's
// state is its records' values appended in order, and each record goes
// on) and a sink task, none started; every bucket routes to seq-1, which
// gained seq-0's keys by fetch on demand.
func seqFixture(t *testing.T) (old, nw, sink *task, job control.JobSpec) {
	t.Helper()
	const buckets = kltCkptBuckets
	q := NewQuery("split")
	q.Source("source", 1).KeyedStateful("seq", []string{"seq"}, func(r Record, st *State, emit Emit) error {
		st.Put("seq", r.Key, append(slices.Clone(st.Get("seq", r.Key)), r.Value...))
		emit(r)
		return nil
	}).Parallelism(2).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	job = control.JobSpec{JobID: "split", Operators: ops, NumBuckets: buckets, BatchSize: 100, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand}}
	dep := control.Deployment{Job: job, Epoch: 1}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		table := make([]int, buckets)
		if op.Name == "seq" {
			for b := range table {
				table[b] = 1 // all count-1's: it gained count-0's keys
			}
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: table})
	}
	tasks := createTasks(t, w, dep)
	t.Cleanup(func() {
		for _, tk := range tasks {
			_ = tk.stop(context.Background())
		}
	})
	return tasks["seq-0"], tasks["seq-1"], tasks["sink-0"], job
}

// TestLocalRecordsDoNotWaitForFetch: a batch mixes records of two local
// keys with records of a key still on its old owner. While the fetch of
// that key is held up, the local keys' records are already processed,
// their state written and their output sent to the next task; then the
// held records follow, each key's records in their order (the operator
// appends each record's value to its key's state).
func TestLocalRecordsDoNotWaitForFetch(t *testing.T) {
	old, nw, sink, job := seqFixture(t)
	keys := keysInBucket(1, 3)
	remote, l1, l2 := keys[0], keys[1], keys[2]
	if err := old.keyed.store.MultiPut([]statesvc.KV{{Key: old.keyed.stateKey("seq", []byte(remote)), Value: []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	nw.keyed.owners.Store("seq-0", control.TaskRef{ID: "seq-0", WorkerID: "w1"})
	nw.keyed.klt.Add(1, []byte(remote), "seq-0")
	owner := &hookStore{Store: old.keyed.store}
	old.keyed.store = owner

	seqOf := func(key string) string {
		v, err := nw.keyed.store.MultiGet([][]byte{nw.keyed.stateKey("seq", []byte(key))})
		if err != nil {
			t.Fatal(err)
		}
		return string(v[0])
	}
	sent := func() (out []string) {
		for {
			select {
			case f := <-sink.inbox:
				sink.taken(f) // as nextFrame does: the frame leaves the inbox
				for _, r := range f.Records {
					out = append(out, string(r.Key)+"="+string(r.Value))
				}
			default:
				return out
			}
		}
	}
	checked := false
	var got []string // records the next task received
	// The fetch of the remote key, held up here until the local part is done.
	owner.onGet = func(n int) {
		checked = true
		want := []string{l1 + "=1", l1 + "=3", l2 + "=4", l2 + "=6"}
		for deadline := time.Now().Add(10 * time.Second); ; {
			got = append(got, sent()...)
			if seqOf(l1)+","+seqOf(l2) == "13,46" && len(got) >= len(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("while the fetch is out, the local keys hold %q (want %q) and the next task got %q: they waited for it", seqOf(l1)+","+seqOf(l2), "13,46", got)
				return
			}
			time.Sleep(time.Millisecond)
		}
		if !slices.Equal(got, want) {
			t.Errorf("while the fetch is out, the next task got %q, want the local keys' records %q", got, want)
		}
		if v := seqOf(remote); v != "" {
			t.Errorf("the remote key holds %q here before its fetch returned", v)
		}
		got = nil
	}
	f := &wire.Frame{Kind: wire.FrameData, JobID: job.JobID, FromTask: "source-0", ToTask: nw.id, Records: []Record{
		{Key: []byte(l1), Value: []byte("1")}, {Key: []byte(remote), Value: []byte("2")}, {Key: []byte(l1), Value: []byte("3")},
		{Key: []byte(l2), Value: []byte("4")}, {Key: []byte(remote), Value: []byte("5")}, {Key: []byte(l2), Value: []byte("6")},
	}}
	if err := nw.handleSettled(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the batch fetched nothing from the old owner")
	}
	if got := seqOf(remote); got != "025" {
		t.Fatalf("the remote key holds %q, want %q (its old value, then its records in order)", got, "025")
	}
	if got, want := append(got, sent()...), []string{remote + "=2", remote + "=5"}; !slices.Equal(got, want) {
		t.Fatalf("after the fetch the next task got %q, want %q", got, want)
	}
	if n := nw.keyed.klt.Len(); n != 0 {
		t.Fatalf("%d lookup entries left after the key was taken", n)
	}
}

// handleSettled is handleFrame, then what the task's loop does once its
// inbox is empty and the fetches it waits for return: the records they
// held are processed. Tests that drive a task frame by frame use it to
// see each batch whole.
func (t *task) handleSettled(ctx context.Context, f *wire.Frame) error {
	if err := t.handleFrame(ctx, f); err != nil {
		return err
	}
	if t.keyed == nil {
		return nil
	}
	if t.keyed.pipe.active() {
		if err := t.outsideBatch(ctx, t.drainFetches); err != nil {
			return err
		}
	}
	return t.releaseFrames(ctx)
}

// createTasks creates every task of dep but its sources on w (not
// started) and returns them by id.
func createTasks(tb testing.TB, w *Worker, dep control.Deployment) map[string]*task {
	tb.Helper()
	tasks := map[string]*task{}
	for _, ref := range dep.Tasks {
		if ref.Operator == "source" {
			continue
		}
		tk, err := w.createTask(dep, ref, nil)
		if err != nil {
			tb.Fatal(err)
		}
		w.tasks[tk.key()] = tk
		tasks[ref.ID] = tk
	}
	return tasks
}
