package exchange

import (
	"context"
	"errors"
	"fmt"
	"koala/dataplane/wire"
	"log/slog"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
)

// Loopback is the worker-to-worker record path without the tasks at
// either end: one worker's outbound lanes (one ordered stream per
// destination task, see peers.go) sending to another worker's exchange
// server over loopback TCP, with the exchange's own gRPC service, framing
// and codec. It exists to measure that path's ceiling and to test it; a
// real worker hands the frames it receives to its tasks instead of counting
// them.
type Loopback struct {
	srv    *grpc.Server
	addr   string
	peers  *Peers
	cancel context.CancelFunc
	recv   *loopbackReceiver
}

// loopbackReceiver is the receiving side's frame handler: it counts.
type loopbackReceiver struct {
	frames, records atomic.Uint64
	onFrame         func(*wire.Frame)
}

func (r *loopbackReceiver) DeliverLocal(_ context.Context, f *wire.Frame) error {
	// Count first: a caller that waits in onFrame for the last record then
	// reads complete counts from Received.
	r.records.Add(uint64(len(f.Records)))
	r.frames.Add(1)
	if r.onFrame != nil {
		r.onFrame(f)
	}
	return nil
}

// TakeState refuses: the loopback carries frames only.
func (r *loopbackReceiver) TakeState(*FetchRequest) (*FetchReply, error) {
	return nil, errors.New("exchange loopback: no state to fetch")
}

// StartLoopback starts the receiving exchange server on a free
// 127.0.0.1 port and the sending peer stream to it (plaintext). onFrame,
// when not nil, sees every frame received, in arrival order, on the
// server's stream goroutine, after it is counted. Close stops both.
func StartLoopback(onFrame func(*wire.Frame)) (*Loopback, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("exchange loopback: listen on 127.0.0.1: %w", err)
	}
	recv := &loopbackReceiver{onFrame: onFrame}
	srv := NewServer(recv, nil)
	go func() { _ = srv.Serve(lis) }()
	ctx, cancel := context.WithCancel(context.Background())
	addr := lis.Addr().String()
	ps := NewPeers(ctx, slog.New(slog.DiscardHandler), nil)
	return &Loopback{srv: srv, addr: addr, peers: ps, cancel: cancel, recv: recv}, nil
}

// Addr is the receiving server's address.
func (l *Loopback) Addr() string { return l.addr }

// Send queues f on its lane (its ToTask's stream), blocking while the lane is
// behind (the exchange's backpressure). f is encoded when the stream sends
// it, so the caller must not change it until it has been received.
func (l *Loopback) Send(ctx context.Context, f *wire.Frame) error {
	return l.peers.Send(ctx, l.addr, f)
}

// Received reports the frames and records the receiving side got so far.
func (l *Loopback) Received() (frames, records uint64) {
	return l.recv.frames.Load(), l.recv.records.Load()
}

// Close stops the sending lanes, waits for their goroutines, and stops the
// server. Frames still queued are dropped.
func (l *Loopback) Close() {
	l.cancel()
	l.peers.Wait()
	l.srv.Stop()
}
