package dataplane

import (
	"context"
	"encoding/binary"
	"log/slog"
	"maps"
	"slices"
	"testing"

	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// newAlignTestSink is a sink task with two upstream tasks, "a" and "b",
// whose checkpoints go to a store in a temporary directory.
func newAlignTestSink(t *testing.T) *task {
	t.Helper()
	store := t.TempDir()
	job := control.JobSpec{JobID: "align", Params: map[string]string{control.ParamCheckpointStore: store}}
	values := newKeyValues()
	tk := &task{
		w: &Worker{log: slog.New(slog.DiscardHandler)}, jobID: job.JobID, id: "sink-0", opName: "sink",
		ledger: newSinkLedger(true, values), latency: newSinkLatency(), values: values,
		op: OperatorFunc(func([]Record, Emit) error { return nil }),
	}
	tk.view.Store(&taskView{job: job, upstreams: []string{"a", "b"}})
	return tk
}

func dataFrame(from string, key string, count uint64, offset int64) *wire.Frame {
	v := make([]byte, 8)
	binary.LittleEndian.PutUint64(v, count)
	return &wire.Frame{Kind: wire.FrameData, JobID: "align", FromTask: from, ToTask: "sink-0",
		Records: []Record{{Key: []byte(key), Value: v, Partition: 0, Offset: offset}}}
}

func barrierFrame(from, id string) *wire.Frame {
	return &wire.Frame{Kind: wire.FrameCheckpoint, JobID: "align", FromTask: from, ToTask: "sink-0", BarrierID: id}
}

// TestCheckpointBarrierAlignment feeds a two-input sink interleaved
// records and barriers and checks the cut: records an input sent before
// its barrier are in the checkpoint, records after it are held (not
// processed) until the other input's barrier arrived, then processed, and
// are not in the checkpoint; the alignment and the ack are recorded.
func TestCheckpointBarrierAlignment(t *testing.T) {
	ctx := context.Background()
	tk := newAlignTestSink(t)
	steps := []struct {
		f            *wire.Frame
		wantReceived uint64 // ledger count after the frame
		wantHeld     int
	}{
		{dataFrame("a", "k1", 1, 0), 1, 0},
		{barrierFrame("a", "cp-000001"), 1, 0},
		{dataFrame("a", "k1", 2, 1), 1, 1}, // after a's barrier: held
		{dataFrame("b", "k2", 1, 2), 2, 1}, // b has not sent the barrier: processed
		{dataFrame("a", "k1", 3, 3), 2, 2},
		{barrierFrame("b", "cp-000001"), 4, 0}, // aligned: checkpoint, then the held frames
		{dataFrame("b", "k2", 2, 4), 5, 0},
	}
	for i, s := range steps {
		if err := tk.handleSettled(ctx, s.f); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got, _, _ := tk.ledger.counts(); got != s.wantReceived {
			t.Fatalf("step %d (%v from %s): sink received %d, want %d", i, s.f.Kind, s.f.FromTask, got, s.wantReceived)
		}
		held := 0
		if tk.ckpt.align != nil {
			held = len(tk.ckpt.align.held)
		}
		if held != s.wantHeld {
			t.Fatalf("step %d: %d frames held, want %d", i, held, s.wantHeld)
		}
	}
	store, err := checkpoint.Open(tk.view.Load().job.Params[control.ParamCheckpointStore])
	if err != nil {
		t.Fatal(err)
	}
	ack, ok, err := store.TaskAck(ctx, "align", "cp-000001", "sink-0")
	if err != nil || !ok {
		t.Fatalf("ack: ok %v err %v", ok, err)
	}
	if ack.Error != "" || ack.Kind != "sink" || ack.Bytes == 0 {
		t.Fatalf("ack %+v: want a sink part without error", ack)
	}
	// The part holds exactly the records before the cut: offsets 0 and 2.
	restored := newAlignTestSink(t)
	dir, err := store.FetchTask(ctx, "align", "cp-000001", "sink-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := restored.loadSinkState(dir); err != nil {
		t.Fatal(err)
	}
	if rec, dist, dup := restored.ledger.counts(); rec != 2 || dist != 2 || dup != 0 {
		t.Fatalf("restored ledger: received %d distinct %d duplicates %d, want 2 2 0", rec, dist, dup)
	}
	if got, want := restored.values.snapshot(), map[string]uint64{"k1": 1, "k2": 1}; !maps.Equal(got, want) {
		t.Fatalf("restored values %v, want %v", got, want)
	}
	// Replaying the records after the cut into the restored sink gives the
	// same output as the original: nothing lost, nothing counted twice.
	for _, f := range []*wire.Frame{dataFrame("a", "k1", 2, 1), dataFrame("a", "k1", 3, 3), dataFrame("b", "k2", 2, 4)} {
		if err := restored.handleSettled(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if r1, d1, u1 := tk.ledger.counts(); true {
		r2, d2, u2 := restored.ledger.counts()
		if r1 != r2 || d1 != d2 || u1 != u2 || u2 != 0 {
			t.Fatalf("after replay: original %d/%d/%d, restored %d/%d/%d (received/distinct/duplicates)", r1, d1, u1, r2, d2, u2)
		}
	}
	if got, want := restored.values.snapshot(), tk.values.snapshot(); !maps.Equal(got, want) {
		t.Fatalf("after replay: values %v, original %v", got, want)
	}
}

// TestCheckpointBarrierAbort checks that an aborted checkpoint releases
// the held input and that its late barrier starts no new alignment.
func TestCheckpointBarrierAbort(t *testing.T) {
	ctx := context.Background()
	tk := newAlignTestSink(t)
	for _, f := range []*wire.Frame{barrierFrame("a", "cp-000001"), dataFrame("a", "k1", 1, 0)} {
		if err := tk.handleSettled(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if got, _, _ := tk.ledger.counts(); got != 0 {
		t.Fatalf("record after the barrier processed before alignment (%d)", got)
	}
	tk.ckpt.abort("cp-000001")
	if err := tk.releaseCheckpointHold(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := tk.ledger.counts(); got != 1 {
		t.Fatalf("after abort: sink received %d, want the held record", got)
	}
	if err := tk.handleSettled(ctx, barrierFrame("b", "cp-000001")); err != nil {
		t.Fatal(err)
	}
	if tk.ckpt.align != nil {
		t.Fatalf("late barrier of an aborted checkpoint started an alignment")
	}
	if err := tk.handleSettled(ctx, dataFrame("a", "k1", 2, 1)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := tk.ledger.counts(); got != 2 {
		t.Fatalf("input held after an aborted checkpoint (received %d, want 2)", got)
	}
	// A newer barrier from an input that skipped the one being aligned
	// abandons it (with a refused ack) and aligns on the newer one.
	for _, f := range []*wire.Frame{barrierFrame("a", "cp-000002"), barrierFrame("b", "cp-000003")} {
		if err := tk.handleSettled(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	store, _ := checkpoint.Open(tk.view.Load().job.Params[control.ParamCheckpointStore])
	ack, ok, _ := store.TaskAck(ctx, "align", "cp-000002", "sink-0")
	if !ok || ack.Error == "" {
		t.Fatalf("abandoned checkpoint: ack %+v (ok %v), want a refusal", ack, ok)
	}
	if a := tk.ckpt.align; a == nil || a.id != "cp-000003" || !slices.Equal(sortedKeys(a.seen), []string{"b"}) {
		t.Fatalf("alignment after the newer barrier: %+v", a)
	}
}

func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestCheckpointAlignmentHoldIsBounded: frames an aligned input sends
// after its barrier are kept until the alignment ends; once they pass
// ReconfigHoldMaxBytes the sender is held (it waits before sending more),
// the other input is not, and the end of the alignment lifts the hold and
// processes every kept frame.
func TestCheckpointAlignmentHoldIsBounded(t *testing.T) {
	ctx := context.Background()
	tk := newAlignTestSink(t)
	tk.holdLimit = control.MinReconfigHoldBytes
	view := *tk.view.Load()
	view.dep = control.Deployment{Tasks: []control.TaskRef{{ID: "a"}, {ID: "b"}}} // on this worker
	tk.view.Store(&view)
	sendHeld := func(from string) bool {
		return tk.w.holds.released(holdKey{job: "align", sender: from, receiver: "sink-0"}) != nil
	}
	if err := tk.handleSettled(ctx, barrierFrame("a", "cp-000001")); err != nil {
		t.Fatal(err)
	}
	frame := recordsBytes(dataFrame("a", "k1", 1, 0).Records)
	n := 0
	for ; n*frame < control.MinReconfigHoldBytes; n++ {
		if sendHeld("a") {
			t.Fatalf("a held after %d bytes, below the bound %d", n*frame, control.MinReconfigHoldBytes)
		}
		if err := tk.handleSettled(ctx, dataFrame("a", "k1", uint64(n+1), int64(n))); err != nil {
			t.Fatal(err)
		}
	}
	if !sendHeld("a") || sendHeld("b") {
		t.Fatalf("after %d bytes kept: a held %v, b held %v; want a only", n*frame, sendHeld("a"), sendHeld("b"))
	}
	if got, _, _ := tk.ledger.counts(); got != 0 {
		t.Fatalf("%d records processed during the alignment, want 0", got)
	}
	if err := tk.handleSettled(ctx, barrierFrame("b", "cp-000001")); err != nil {
		t.Fatal(err)
	}
	if sendHeld("a") || tk.w.holds.active.Load() != 0 {
		t.Fatal("a still held after the alignment ended")
	}
	if got, _, _ := tk.ledger.counts(); got != uint64(n) {
		t.Fatalf("after the alignment %d records processed, want the %d kept", got, n)
	}
	if len(tk.heldSenders) != 0 {
		t.Fatalf("task still lists held senders %v", tk.heldSenders)
	}
}

// TestHoldReasonsCombine: a sender held by the route gates and by a
// checkpoint alignment stays held until both let it go.
func TestHoldReasonsCombine(t *testing.T) {
	tk := newAlignTestSink(t)
	a := control.TaskRef{ID: "a"}
	held := func() bool { return tk.w.holds.released(holdKey{job: "align", sender: "a", receiver: "sink-0"}) != nil }
	steps := []struct {
		hold bool
		why  holdReason
		want bool
	}{
		{true, holdForDrain, true},
		{true, holdForAlignment, true},
		{false, holdForDrain, true}, // the alignment still holds it
		{false, holdForDrain, true}, // lifting twice changes nothing
		{false, holdForAlignment, false},
		{true, holdForAlignment, true},
		{false, holdForAlignment, false},
	}
	for i, s := range steps {
		if s.hold {
			tk.holdSender(a, s.why)
		} else {
			tk.unholdSender(a, s.why)
		}
		if held() != s.want {
			t.Fatalf("step %d (hold %v, reason %d): held %v, want %v", i, s.hold, s.why, held(), s.want)
		}
	}
}
