package dataplane

import (
	"context"
	"log/slog"
	"testing"

	"koala/dataplane/wire"
)

// A new owner holds an upstream's watermark until the old owner says that
// upstream is drained, even when it holds none of its records: the old
// owner may still forward records the upstream routed the old way, and a
// watermark that overtook them would fire their windows without them.
func TestGateHoldsWatermarkUntilSenderDrained(t *testing.T) {
	tk := &task{id: "n", w: &Worker{log: slog.Default()}}
	tk.openGate("o", map[int]bool{3: true})
	view := &taskView{}
	wm := func() *wire.Frame {
		return &wire.Frame{Kind: wire.FrameWatermark, FromTask: "src", Records: []Record{{EventTime: 42, Offset: -1}}}
	}
	if !tk.gateable(view, wm()) {
		t.Fatal("a watermark from an upstream task is not subject to the gate")
	}
	if got := tk.admit(view, wm()); got != nil {
		t.Fatal("watermark admitted before the old owner drained its sender")
	}
	if n := len(tk.gates.held["src"]); n != 1 {
		t.Fatalf("%d frames held for src, want 1", n)
	}
	// Another sender's frames queue behind nothing of src's.
	other := &wire.Frame{Kind: wire.FrameBarrier, FromTask: "src2"}
	if got := tk.admit(view, other); got != other {
		t.Fatal("a barrier of a sender with nothing held was held")
	}
	tk.gates.from["o"].drained["src"] = true
	delete(tk.gates.held, "src")
	if got := tk.admit(view, wm()); got == nil {
		t.Fatal("watermark held after its sender was drained")
	}
}

// Records an old owner forwards after its handoff are judged late by the
// old owner's watermark at the handoff, not by the new owner's, which may
// be past them: an upstream's later watermark can reach the new owner over
// one stream before the old owner receives, over another, records that
// upstream sent it earlier.
func TestForwardedRecordsUseOldOwnersLateBound(t *testing.T) {
	tk := &task{id: "n", w: &Worker{log: slog.Default()}}
	fwd := &wire.Frame{Kind: wire.FrameData, FromTask: "o"}
	if _, ok := tk.forwardedLateBound(fwd); ok {
		t.Fatal("a late bound without any gate")
	}
	tk.openGate("o", map[int]bool{1: true})
	if _, ok := tk.forwardedLateBound(fwd); ok {
		t.Fatal("a late bound before the old owner's handoff end named its watermark")
	}
	tk.setGateWatermark("o", 100)
	if wm, ok := tk.forwardedLateBound(fwd); !ok || wm != 100 {
		t.Fatalf("late bound %d (%v), want the old owner's 100", wm, ok)
	}
	if _, ok := tk.forwardedLateBound(&wire.Frame{Kind: wire.FrameData, FromTask: "src"}); ok {
		t.Fatal("a direct upstream's records got the old owner's bound")
	}
	// The window operator judges by the bound while it is set.
	var lb LateBound
	if !lb.IsLate(150, 200) {
		t.Fatal("150 is late at watermark 200")
	}
	lb.SetLateBound(100, true)
	if lb.IsLate(150, 200) || !lb.IsLate(100, 200) {
		t.Fatal("with bound 100, 150 is on time and 100 late")
	}
	lb.SetLateBound(0, false)
	if !lb.IsLate(150, 200) {
		t.Fatal("the bound outlived its batch")
	}
	// The gate closes once the old owner has drained every sender.
	tk.onRouteDrained(context.Background(), &wire.Frame{Kind: wire.FrameRouteDrained, FromTask: "o", Records: []Record{{Key: []byte(drainAll)}}})
	if _, ok := tk.forwardedLateBound(fwd); ok {
		t.Fatal("a late bound after the old owner drained")
	}
}
