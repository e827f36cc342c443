package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
	"koala/statesvc"
)

func TestTimerIndexTake(t *testing.T) {
	cases := []struct {
		name      string
		take      []string
		wantTaken []string // "time:key", in time order
		wantLeft  []string // keys due at MaxWatermark, sorted
		wantTimes int
	}{
		{"none", nil, nil, []string{"a", "b", "c"}, 3},
		{"one key, every time", []string{"a"}, []string{"10:a", "30:a"}, []string{"b", "c"}, 2},
		{"a whole time", []string{"b", "c"}, []string{"20:b", "20:c", "30:c"}, []string{"a"}, 2},
		{"everything", []string{"a", "b", "c"}, []string{"10:a", "20:b", "20:c", "30:a", "30:c"}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var x TimerIndex
			x.Add(30, []byte("c"))
			x.Add(10, []byte("a"))
			x.Add(20, []byte("b"))
			x.Add(20, []byte("c"))
			x.Add(30, []byte("a"))
			var got []string
			for _, tm := range x.take(func(k string) bool { return slices.Contains(c.take, k) }) {
				got = append(got, fmt.Sprintf("%d:%s", tm.at, tm.key))
			}
			slices.Sort(got) // keys of one time come in map order
			if !slices.Equal(got, c.wantTaken) {
				t.Fatalf("taken %v, want %v", got, c.wantTaken)
			}
			if x.Len() != c.wantTimes {
				t.Fatalf("%d times left, want %d", x.Len(), c.wantTimes)
			}
			var left []string
			for _, k := range x.PopDue(MaxWatermark) {
				left = append(left, string(k))
			}
			if !slices.Equal(left, c.wantLeft) {
				t.Fatalf("left %v, want %v", left, c.wantLeft)
			}
		})
	}
}

// scanCounting counts the scans of a task's store: a timer index rebuilt
// from state shows up as scans.
type scanCounting struct {
	*hookStore
	scans atomic.Int32
}

func (s *scanCounting) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	s.scans.Add(1)
	return s.hookStore.Scan(start, end, fn)
}

// untimedWindow is a window operator seen only through StateTimers, as an
// operator outside this package that keeps no TimerIndexOwner would be.
type untimedWindow struct{ w *windowOperator }

func (u untimedWindow) StateNames() []string                   { return u.w.StateNames() }
func (u untimedWindow) ProcessBatch(in []Record, e Emit) error { return u.w.ProcessBatch(in, e) }
func (u untimedWindow) ProcessKeyed(in []Record, st *State, e Emit) error {
	return u.w.ProcessKeyed(in, st, e)
}
func (u untimedWindow) DueKeys(wm int64) [][]byte { return u.w.DueKeys(wm) }
func (u untimedWindow) OnWatermark(wm int64, st *State, e Emit) error {
	return u.w.OnWatermark(wm, st, e)
}
func (u untimedWindow) TimerStates() []string { return u.w.indexedStates() }
func (u untimedWindow) ResetTimers()          { u.w.resetIndex() }
func (u untimedWindow) IndexTimers(state string, key, value []byte) {
	u.w.indexValue(state, key, value)
}

// timerFixture: a tumbling window of one second in two tasks on one
// worker, win-0 owning every bucket, fetch-on-demand (no background
// migration), and the sink's inbox read by the test.
type timerFixture struct {
	dep    control.Deployment
	win    [2]*task
	sink   *task
	store1 *scanCounting // win-1's store
	out    map[string]uint64
	dups   []string
}

func newTimerFixture(t *testing.T, name string, untimed bool) *timerFixture {
	t.Helper()
	f, err := NewWindowFactory(Tumbling(time.Second), countAgg)
	if err != nil {
		t.Fatal(err)
	}
	factory := f
	if untimed {
		factory = func(ctx OperatorContext) (Operator, error) {
			op, err := f(ctx)
			if err != nil {
				return nil, err
			}
			return untimedWindow{op.(*windowOperator)}, nil
		}
	}
	q := NewQuery(name)
	q.Source("source", 1).Process("win", factory, true).Parallelism(2).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	job := control.JobSpec{JobID: name, Operators: ops, NumBuckets: kltCkptBuckets, BatchSize: 100, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand}}
	dep := control.Deployment{Job: job, Epoch: 1}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: 1, Buckets: make([]int, kltCkptBuckets)})
	}
	fx := &timerFixture{dep: dep, out: map[string]uint64{}}
	made := createTasks(t, w, dep)
	for id, tk := range made {
		switch id {
		case "win-0":
			fx.win[0] = tk
		case "win-1":
			fx.win[1] = tk
		default:
			fx.sink = tk
		}
	}
	t.Cleanup(func() {
		for _, tk := range made {
			_ = tk.stop(context.Background())
		}
	})
	fx.store1 = &scanCounting{hookStore: &hookStore{Store: fx.win[1].keyed.store}}
	fx.win[1].keyed.store = fx.store1
	return fx
}

func (fx *timerFixture) records(t *testing.T, i int, recs []Record) {
	t.Helper()
	tk := fx.win[i]
	f := &wire.Frame{Kind: wire.FrameData, JobID: tk.jobID, FromTask: "source-0", ToTask: tk.id, Records: recs}
	if err := tk.handleSettled(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

// watermark advances both tasks to wm and collects what they fired.
func (fx *timerFixture) watermark(t *testing.T, wm int64) {
	t.Helper()
	for _, tk := range fx.win {
		f := &wire.Frame{Kind: wire.FrameWatermark, JobID: tk.jobID, FromTask: "source-0", ToTask: tk.id, Records: []Record{{EventTime: wm, Partition: -1}}}
		if err := tk.handleSettled(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	for {
		select {
		case f := <-fx.sink.inbox:
			fx.sink.taken(f) // as nextFrame does: the frame leaves the inbox
			if f.Kind != wire.FrameData {
				continue
			}
			for _, r := range f.Records {
				if _, dup := fx.out[string(r.Key)]; dup {
					fx.dups = append(fx.dups, string(r.Key))
				}
				fx.out[string(r.Key)] = binary.LittleEndian.Uint64(r.Value)
			}
		default:
			return
		}
	}
}

// handOver moves buckets from win-0 to win-1 the lazy way: win-1 learns
// its buckets, win-0 hands off, win-1 installs, and win-0's only upstream
// is drained, so the gate opens.
func (fx *timerFixture) handOver(t *testing.T, buckets []int) {
	t.Helper()
	ctx := context.Background()
	next := fx.dep
	next.Epoch = 2
	next.Routing = slices.Clone(fx.dep.Routing)
	for i, rt := range next.Routing {
		if rt.Operator == "win" {
			table := slices.Clone(rt.Buckets)
			for _, b := range buckets {
				table[b] = 1
			}
			next.Routing[i] = control.RoutingTable{Operator: "win", Epoch: 2, Buckets: table}
		}
	}
	fx.win[1].openGainedGates(next)
	if err := fx.win[0].handoff(ctx, next, "r1", false, false); err != nil {
		t.Fatal(err)
	}
	fx.win[0].handoffSends.Wait()
	barrier := &wire.Frame{Kind: wire.FrameRouteBarrier, JobID: fx.dep.Job.JobID, FromTask: "source-0", ToTask: "win-0", BarrierID: "r1/swap"}
	if err := fx.win[0].handleSettled(ctx, barrier); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case f := <-fx.win[1].inbox:
			fx.win[1].taken(f) // as nextFrame does: the frame leaves the inbox
			if err := fx.win[1].handleSettled(ctx, f); err != nil {
				t.Fatal(err)
			}
			continue
		default:
		}
		break
	}
	if fx.win[1].gates != nil && len(fx.win[1].gates.from) > 0 {
		t.Fatal("win-1's gate is still open after its old owner drained")
	}
	fx.dep = next
}

// TestWindowTimersMoveWithKeys: a lazy handoff of a window operator moves
// the timers of the keys it moves, so the new owner fetches, at a
// watermark, exactly the keys whose windows are due there — not every key
// still on the old owner — scans none of its state, and rebuilds nothing
// when another operator is reconfigured; every window fires once, at its
// watermark, with its full count. Without a TimerIndexOwner the new owner
// pulls and scans the buckets it gained instead, with the same result.
func TestWindowTimersMoveWithKeys(t *testing.T) {
	for _, untimed := range []bool{false, true} {
		t.Run(fmt.Sprintf("untimed=%v", untimed), func(t *testing.T) { runWindowTimersMove(t, untimed) })
	}
}

func runWindowTimersMove(t *testing.T, untimed bool) {
	fx := newTimerFixture(t, fmt.Sprintf("timer-move-%v", untimed), untimed)
	sec := int64(time.Second)
	t0 := int64(1_700_000_000) * sec
	moved := []int{1, 3, 5, 7, 9, 11, 13, 15}
	var dueKeys, laterKeys, fetchedByBatch, keptKeys []string
	for _, b := range moved {
		ks := keysInBucket(b, 6)
		dueKeys = append(dueKeys, ks[:3]...)           // a window ending at t0+1s
		fetchedByBatch = append(fetchedByBatch, ks[3]) // the same, and a record after the move
		laterKeys = append(laterKeys, ks[4:]...)       // only a window ending at t0+3s
		keptKeys = append(keptKeys, keysInBucket(b-1, 2)...)
	}
	want := map[string]uint64{}
	var recs []Record
	add := func(key string, ts int64) Record {
		want[string(WindowResultKey([]byte(key), (ts/sec+1)*sec))]++
		return Record{Key: []byte(key), EventTime: ts}
	}
	for i := range 3 {
		for _, k := range slices.Concat(dueKeys, fetchedByBatch, keptKeys) {
			recs = append(recs, add(k, t0+int64(100+300*i)*int64(time.Millisecond)))
		}
		for _, k := range laterKeys {
			recs = append(recs, add(k, t0+2*sec+int64(100+300*i)*int64(time.Millisecond)))
		}
	}
	fx.records(t, 0, recs)
	fx.watermark(t, t0-1) // win-0 indexes its state; nothing is due
	fx.handOver(t, moved)

	w1 := fx.win[1].keyed
	if n := w1.klt.Len(); n != len(dueKeys)+len(fetchedByBatch)+len(laterKeys) {
		t.Fatalf("win-1's table lists %d keys after the handoff, want %d", n, len(dueKeys)+len(fetchedByBatch)+len(laterKeys))
	}
	if !untimed {
		left := fx.win[0].op.(*windowOperator).index.take(func(k string) bool {
			return slices.Contains(moved, statesvc.BucketOf([]byte(k), kltCkptBuckets))
		})
		if len(left) != 0 {
			t.Fatalf("win-0 kept %d timers of the buckets it handed over", len(left))
		}
	}
	var after []Record
	for _, k := range fetchedByBatch {
		after = append(after, add(k, t0+950*int64(time.Millisecond)))
	}
	fx.records(t, 1, after)
	fetchedBefore := w1.keysFetched.Load()

	fx.watermark(t, t0+sec+200*int64(time.Millisecond))
	firstEnd := fmt.Sprintf("@%d", (t0+sec)/int64(time.Millisecond))
	for k, n := range want {
		if strings.HasSuffix(k, firstEnd) && fx.out[k] != n {
			t.Fatalf("window %s: %d at the watermark after its end, want %d", k, fx.out[k], n)
		}
	}
	fetchedAtWatermark := w1.keysFetched.Load() - fetchedBefore
	scans := fx.store1.scans.Load()
	if untimed {
		// No timers came: the gained buckets were pulled whole and scanned.
		if w1.klt.Len() != 0 || scans == 0 {
			t.Fatalf("untimed: %d keys still remote and %d scans after the first watermark, want 0 and some", w1.klt.Len(), scans)
		}
	} else {
		if got := w1.klt.Len(); got != len(laterKeys) {
			t.Fatalf("%d keys still remote after the watermark, want the %d whose windows are not due", got, len(laterKeys))
		}
		if fetchedAtWatermark != uint64(len(dueKeys)) {
			t.Fatalf("the watermark fetched %d keys, want the %d due ones", fetchedAtWatermark, len(dueKeys))
		}
		if scans != 0 {
			t.Fatalf("win-1 scanned its store %d times for its timers, want none", scans)
		}
	}

	// Another operator's reconfiguration: nothing to rebuild.
	other := fx.dep
	other.Epoch = 3
	other.Routing = slices.Clone(fx.dep.Routing)
	for i, rt := range other.Routing {
		if rt.Operator == "sink" {
			other.Routing[i].Epoch = 3
		}
	}
	for _, tk := range fx.win {
		if before, after := tk.mergeView(other); before == after {
			t.Fatal("the sink's new routing did not change the view")
		}
	}
	remote := w1.klt.Len()
	fx.watermark(t, t0+sec+500*int64(time.Millisecond))
	if got := fx.store1.scans.Load(); got != scans || w1.klt.Len() != remote {
		t.Fatalf("after the sink's reconfiguration: %d scans (was %d), %d keys remote (was %d)", got, scans, w1.klt.Len(), remote)
	}

	fx.watermark(t, MaxWatermark)
	if w1.klt.Len() != 0 {
		t.Fatalf("%d keys still remote after the final watermark", w1.klt.Len())
	}
	if len(fx.dups) > 0 {
		t.Fatalf("windows fired twice: %v", fx.dups)
	}
	if !maps.Equal(fx.out, want) {
		t.Fatalf("fired %d windows, want %d:\n%v\nwant\n%v", len(fx.out), len(want), fx.out, want)
	}
}
