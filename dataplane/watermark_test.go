package dataplane

import (
	"context"
	"log/slog"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

func specWithInputs(inputs []string) control.OperatorSpec {
	return control.OperatorSpec{Name: "op", Inputs: inputs}
}

func jobWithParams(p map[string]string) control.JobSpec { return control.JobSpec{Params: p} }

// wmRecorder records the watermarks its task passes to the hook.
type wmRecorder struct{ got []int64 }

func (r *wmRecorder) ProcessBatch([]Record, Emit) error { return nil }
func (r *wmRecorder) OnWatermark(wm int64, st *State, _ Emit) error {
	if st != nil {
		panic("stateless operator got state")
	}
	r.got = append(r.got, wm)
	return nil
}

// terminalTask is a sink-like task (no downstream) with upstreams ups.
func terminalTask(op Operator, ups ...string) *task {
	t := &task{w: &Worker{log: slog.Default()}, id: "sink-0", opName: "sink", op: op}
	t.view.Store(&taskView{upstreams: ups})
	return t
}

func wmFrame(from string, wm int64, idle bool) *wire.Frame {
	var flag int64
	if idle {
		flag = 1
	}
	return &wire.Frame{Kind: wire.FrameWatermark, FromTask: from, Records: []Record{{EventTime: wm, Offset: flag}}}
}

func TestWatermarkMinOverUpstreams(t *testing.T) {
	rec := &wmRecorder{}
	tk := terminalTask(rec, "a-0", "a-1")
	ctx := context.Background()
	step := func(f *wire.Frame) {
		t.Helper()
		if err := tk.handleSettled(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	step(wmFrame("a-0", 100, false)) // a-1 unknown: holds it back
	step(wmFrame("a-1", 50, false))  // min 50
	step(wmFrame("a-1", 150, false)) // min 100
	step(wmFrame("a-0", 90, false))  // regressions are ignored: still 100
	step(wmFrame("a-0", 200, false)) // min 150
	step(wmFrame("a-1", 0, true))    // a-1 idle: only a-0 counts → 200
	step(wmFrame("a-0", 0, true))    // everyone idle: nothing moves
	step(wmFrame("a-1", 180, false)) // a-1 back, below the current: no regression
	step(wmFrame("a-1", 300, false)) // a-0 still idle → 300
	want := []int64{50, 100, 150, 200, 300}
	if len(rec.got) != len(want) {
		t.Fatalf("hook saw %v, want %v", rec.got, want)
	}
	for i := range want {
		if rec.got[i] != want[i] {
			t.Fatalf("hook saw %v, want %v", rec.got, want)
		}
	}
	if got := tk.wm.pub.Load(); got != 300 {
		t.Fatalf("published watermark %d, want 300", got)
	}
	if err := tk.handleSettled(ctx, &wire.Frame{Kind: wire.FrameWatermark, FromTask: "a-0"}); err == nil {
		t.Fatal("a watermark frame without its record was accepted")
	}
}

func TestWatermarkFrameRoundTrip(t *testing.T) {
	f := wmFrame("src-0", MaxWatermark, true)
	f.JobID, f.ToTask = "j", "op-1"
	got, err := wire.DecodeFrame(wire.AppendFrame(nil, f))
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != wire.FrameWatermark || got.Records[0].EventTime != MaxWatermark || got.Records[0].Offset != 1 || got.Kind.String() != "watermark" {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestMaxOutOfOrdernessParam(t *testing.T) {
	if d, err := MaxOutOfOrderness(nil); err != nil || d != DefaultMaxOutOfOrderness {
		t.Fatalf("default: %v %v", d, err)
	}
	if d, err := MaxOutOfOrderness(map[string]string{control.ParamMaxOutOfOrderness: "1500"}); err != nil || d.Milliseconds() != 1500 {
		t.Fatalf("1500: %v %v", d, err)
	}
	if _, err := MaxOutOfOrderness(map[string]string{control.ParamMaxOutOfOrderness: "-1"}); err == nil {
		t.Fatal("-1 accepted")
	}
}
