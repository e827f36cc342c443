package dataplane

import (
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
