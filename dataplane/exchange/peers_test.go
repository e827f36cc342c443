package exchange

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"koala/dataplane/wire"
)

// stuckTask is a receiving worker whose task "busy" takes no frame until
// released (a full inbox), while every other task takes frames at once.
type stuckTask struct {
	release chan struct{}
	mu      sync.Mutex
	got     map[string][]int64 // task (or "control") -> offsets, in arrival order
}

func newStuckTask() *stuckTask {
	return &stuckTask{release: make(chan struct{}), got: map[string][]int64{}}
}

func (s *stuckTask) DeliverLocal(ctx context.Context, f *wire.Frame) error {
	if f.Kind == wire.FrameData && f.ToTask == "busy" {
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	name := f.ToTask
	if f.Kind == wire.FrameCredit {
		name = "control"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[name] = append(s.got[name], int64(f.Seq))
	return nil
}

func (s *stuckTask) TakeState(*FetchRequest) (*FetchReply, error) {
	return nil, errors.New("no state here")
}

func (s *stuckTask) arrived(name string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.got[name]...)
}

// waitArrived polls until want frames for name have arrived.
func waitArrived(t *testing.T, s *stuckTask, name string, want int, within time.Duration) []int64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := s.arrived(name)
		if len(got) >= want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames for %s arrived within %s", len(got), want, name, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dataFrame(job, to string, seq int64) *wire.Frame {
	return &wire.Frame{Kind: wire.FrameData, JobID: job, FromTask: "up", ToTask: to, Seq: uint64(seq),
		Records: []wire.Record{{Key: []byte("k"), Value: []byte("v"), Offset: seq}}}
}

// TestBusyTaskHoldsUpNoOtherTask is the deadlock of one stream per worker
// pair: a frame to a task that takes none held up every frame behind it to
// the same worker. Each task now has its own lane, so frames to "idle" and
// credits arrive while "busy" takes nothing, and busy's frames arrive, in
// order, once it is released.
func TestBusyTaskHoldsUpNoOtherTask(t *testing.T) {
	recv := newStuckTask()
	addr := serve(t, recv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps := NewPeers(ctx, slog.New(slog.DiscardHandler), nil)

	const n = 5
	for i := range n {
		if err := ps.Send(ctx, addr, dataFrame("j", "busy", int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if err := ps.Send(ctx, addr, dataFrame("j", "idle", int64(i))); err != nil {
			t.Fatal(err)
		}
		credit := &wire.Frame{Kind: wire.FrameCredit, JobID: "j", FromTask: "busy", ToTask: "source-0", Seq: uint64(i)}
		if err := ps.Send(ctx, addr, credit); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"idle", "control"} {
		got := waitArrived(t, recv, name, n, 10*time.Second)
		for i, seq := range got {
			if seq != int64(i) {
				t.Fatalf("%s: frame %d arrived carrying seq %d: %v", name, i, seq, got)
			}
		}
	}
	if got := recv.arrived("busy"); len(got) != 0 {
		t.Fatalf("busy took %d frames before it was released", len(got))
	}
	if got := lanes(ps); got != 3 {
		t.Fatalf("%d lanes open, want 3 (busy, idle, control)", got)
	}
	close(recv.release)
	got := waitArrived(t, recv, "busy", n, 10*time.Second)
	for i, seq := range got {
		if seq != int64(i) {
			t.Fatalf("busy: frame %d arrived carrying seq %d: %v", i, seq, got)
		}
	}
}

// TestCloseJobSendsWhatIsQueued closes a job's lanes while a frame is
// still held by a busy receiver: the frame still arrives, the lanes'
// goroutines exit, the control lane and other jobs' lanes stay, and a
// frame sent to the job afterwards opens a new lane and arrives too.
func TestCloseJobSendsWhatIsQueued(t *testing.T) {
	recv := newStuckTask()
	addr := serve(t, recv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps := NewPeers(ctx, slog.New(slog.DiscardHandler), nil)

	send := func(f *wire.Frame) {
		t.Helper()
		if err := ps.Send(ctx, addr, f); err != nil {
			t.Fatal(err)
		}
	}
	send(dataFrame("old", "busy", 0))
	send(dataFrame("old", "idle", 0))
	send(dataFrame("other", "idle", 0))
	send(&wire.Frame{Kind: wire.FrameCredit, JobID: "old", FromTask: "idle", ToTask: "source-0"})
	waitArrived(t, recv, "idle", 2, 10*time.Second)
	if got := lanes(ps); got != 4 {
		t.Fatalf("%d lanes open, want 4", got)
	}
	ps.mu.Lock()
	closing := []*Peer{ps.lanes[laneKey{addr, "old", "busy"}], ps.lanes[laneKey{addr, "old", "idle"}]}
	ps.mu.Unlock()

	ps.CloseJob("old")
	if got := lanes(ps); got != 2 {
		t.Fatalf("%d lanes open after closing job old, want 2 (other's and control)", got)
	}
	close(recv.release)
	waitArrived(t, recv, "busy", 1, 10*time.Second)
	for i, p := range closing {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("closed lane %d still running", i)
		}
		if err := p.Send(ctx, dataFrame("old", "busy", 9)); !errors.Is(err, errLaneClosed) {
			t.Fatalf("send on closed lane %d: %v, want errLaneClosed", i, err)
		}
	}
	// The closed lanes leave nothing behind once they exited.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ps.mu.Lock()
		n := len(ps.retiring)
		ps.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d closed lanes still listed", n)
		}
	}
	send(dataFrame("old", "busy", 1))
	got := waitArrived(t, recv, "busy", 2, 10*time.Second)
	if fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("busy got %v, want [0 1]", got)
	}
}

// TestCloseJobRacingSends closes a job's lanes while senders keep sending
// to it: every frame arrives exactly once and in order, a new lane to the
// task waiting for the closed one to send what it held.
func TestCloseJobRacingSends(t *testing.T) {
	recv := newStuckTask()
	close(recv.release)
	addr := serve(t, recv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ps := NewPeers(ctx, slog.New(slog.DiscardHandler), nil)

	const n = 2000
	errs := make(chan error, 1)
	go func() {
		for i := range n {
			if err := ps.Send(ctx, addr, dataFrame("j", "t", int64(i))); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for i := 0; i < 50; i++ {
		ps.CloseJob("j")
		time.Sleep(time.Millisecond)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	got := waitArrived(t, recv, "t", n, 20*time.Second)
	if len(got) != n {
		t.Fatalf("%d frames arrived, want %d", len(got), n)
	}
	for i, seq := range got {
		if seq != int64(i) {
			t.Fatalf("frame %d arrived carrying seq %d", i, seq)
		}
	}
}

// lanes is how many lanes ps has open.
func lanes(ps *Peers) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.lanes)
}
