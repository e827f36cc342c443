package exchange

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"koala/dataplane/budget"
	"koala/dataplane/transport"
	"koala/dataplane/wire"
)

// A worker sends to a remote worker on one stream per destination task (a
// lane), over one connection per remote worker.
//
// One stream per worker pair deadlocked: the receiving end hands each
// frame to its task's bounded inbox and waits while that inbox is full, so
// a frame to a busy task held up every frame behind it, to any task of
// that worker. Tasks that are a DAG become a cycle through the streams
// they share: on twitch (source and streamSummary on one worker,
// userSessions and the sink on a second, both streamViewers on a third)
// streamSummary waited to send to the sink behind frames for the full
// userSessions, which waited on the full streamViewers-1, which waited on
// the full streamSummary, and the job stopped for good. With a lane per
// task, a frame waits only behind frames to its own task, which would
// have waited for that task anyway.
//
// Credits and holds are applied by the receiving worker at once, never
// queued behind records (credit_return.go, route_hold.go), and a hold
// must reach a task whose own inbox is full, so they take a lane of their
// own per remote worker.

// laneKey names a lane: the remote worker, and the task its frames go to
// (empty for the control lane).
type laneKey struct {
	addr, job, task string
}

func laneOf(addr string, f *wire.Frame) laneKey {
	if f.Kind == wire.FrameCredit {
		return laneKey{addr: addr}
	}
	return laneKey{addr: addr, job: f.JobID, task: f.ToTask}
}

// Peer is one ordered outbound stream (a lane). One goroutine sends, so
// frames keep the order they were queued in.
type Peer struct {
	addr  string
	conn  func() (*grpc.ClientConn, error)
	queue chan queued
	bytes *budget.Budget // encoded bytes in queue
	log   *slog.Logger
	done  chan struct{}

	// closing is closed when the lane's job has no task left on this
	// worker: the lane sends what is queued, ends its stream and exits.
	closing chan struct{}
	mu      sync.Mutex
	sending int  // Sends between their check of closed and their enqueue
	closed  bool // the goroutine has exited or is about to: Send refuses
}

// errLaneClosed makes Peers.Send take a fresh lane.
var errLaneClosed = errors.New("exchange: lane closed")

// Peers holds the lanes to remote workers and one connection per remote
// worker that they share.
type Peers struct {
	mu    sync.Mutex
	lanes map[laneKey]*Peer
	// retiring are closed lanes still sending what they hold; a new lane
	// to the same task waits for its predecessor, so frames to a task keep
	// their order across a close.
	retiring map[laneKey]*Peer
	conns    map[string]*grpc.ClientConn
	ctx      context.Context
	log      *slog.Logger
	creds    credentials.TransportCredentials
	wg       sync.WaitGroup
	down     bool // ctx ended: no lane starts any more
}

// NewPeers starts no stream yet: each lane dials on first use and
// reopens its stream, with backoff, until ctx ends.
func NewPeers(ctx context.Context, log *slog.Logger, creds credentials.TransportCredentials) *Peers {
	ps := &Peers{lanes: map[laneKey]*Peer{}, retiring: map[laneKey]*Peer{}, conns: map[string]*grpc.ClientConn{}, ctx: ctx, log: log, creds: creds}
	go func() {
		<-ctx.Done()
		ps.mu.Lock()
		ps.down = true
		ps.mu.Unlock()
		ps.wg.Wait()
		ps.mu.Lock()
		defer ps.mu.Unlock()
		for _, c := range ps.conns {
			_ = c.Close()
		}
		ps.conns = map[string]*grpc.ClientConn{}
	}()
	return ps
}

// Send queues f on its lane to addr, starting the lane on first use; it
// blocks while that lane is behind, which is how backpressure from the
// destination task reaches the sender.
func (ps *Peers) Send(ctx context.Context, addr string, f *wire.Frame) error {
	k := laneOf(addr, f)
	for {
		if err := ps.ctx.Err(); err != nil {
			return fmt.Errorf("exchange to %s: shut down: %w", addr, err)
		}
		err := ps.lane(k).Send(ctx, f)
		if !errors.Is(err, errLaneClosed) {
			return err
		}
	}
}

func (ps *Peers) lane(k laneKey) *Peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for {
		old, ok := ps.retiring[k]
		if !ok {
			break
		}
		ps.mu.Unlock()
		select {
		case <-old.done:
		case <-ps.ctx.Done():
		}
		ps.mu.Lock()
		if ps.retiring[k] == old {
			delete(ps.retiring, k)
		}
	}
	p, ok := ps.lanes[k]
	if ok {
		return p
	}
	p = newLane(k.addr, func() (*grpc.ClientConn, error) { return ps.conn(k.addr) }, ps.log, peerQueueFrames, peerQueueBytes)
	if ps.down {
		p.closed = true // Send refuses, and Peers.Send sees ctx's end
		return p
	}
	ps.lanes[k] = p
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		p.run(ps.ctx)
		ps.mu.Lock()
		defer ps.mu.Unlock()
		if ps.retiring[k] == p {
			delete(ps.retiring, k)
		}
	}()
	return p
}

// conn returns the connection to addr that every lane to it shares.
func (ps *Peers) conn(addr string) (*grpc.ClientConn, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if c, ok := ps.conns[addr]; ok {
		return c, nil
	}
	if ps.ctx.Err() != nil {
		return nil, ps.ctx.Err()
	}
	c, err := dial(addr, ps.creds)
	if err != nil {
		return nil, err
	}
	ps.conns[addr] = c
	return c, nil
}

// CloseJob ends the lanes to job's tasks once what they hold is sent. A
// worker calls it when the job has no task left on it: nothing here sends
// to the job's tasks any more, and a long-lived worker would otherwise
// keep a stream and a goroutine per task of every job it ever ran.
func (ps *Peers) CloseJob(job string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for k, p := range ps.lanes {
		if k.job == job && k.task != "" {
			delete(ps.lanes, k)
			ps.retiring[k] = p
			close(p.closing) // once: the lane has left ps.lanes
		}
	}
}

// Wait waits for every lane's goroutine to exit (after ctx ends).
func (ps *Peers) Wait() { ps.wg.Wait() }

// A lane reopens a failed stream on its connection, which reconnects on
// its own; its backoff is capped at the lane's so that a restarted worker
// is reached again within seconds, not gRPC's default two minutes.
func dial(addr string, creds credentials.TransportCredentials) (*grpc.ClientConn, error) {
	c, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(transport.OrPlaintext(creds)),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{}), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		grpc.WithInitialWindowSize(exchangeWindow), grpc.WithInitialConnWindowSize(exchangeWindow),
		grpc.WithReadBufferSize(exchangeIOBuffer), grpc.WithWriteBufferSize(exchangeIOBuffer),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxDelay: maxStreamBackoff},
			MinConnectTimeout: 5 * time.Second,
		}))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return c, nil
}

const maxStreamBackoff = 2 * time.Second

// queued is a frame waiting in a Peer's queue, with its encoded size.
type queued struct {
	f *wire.Frame
	n int
}

// newPeer is a lane with a connection of its own (tests).
func newPeer(addr string, creds credentials.TransportCredentials, log *slog.Logger, frames, bytes int) *Peer {
	var once sync.Once
	var c *grpc.ClientConn
	var err error
	return newLane(addr, func() (*grpc.ClientConn, error) {
		once.Do(func() { c, err = dial(addr, creds) })
		return c, err
	}, log, frames, bytes)
}

func newLane(addr string, conn func() (*grpc.ClientConn, error), log *slog.Logger, frames, bytes int) *Peer {
	return &Peer{addr: addr, conn: conn, queue: make(chan queued, frames), bytes: budget.New(bytes), log: log,
		done: make(chan struct{}), closing: make(chan struct{})}
}

// Send queues f; it blocks when the lane is behind, which is how
// backpressure reaches the sending task.
func (p *Peer) Send(ctx context.Context, f *wire.Frame) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errLaneClosed
	}
	p.sending++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.sending--
		p.mu.Unlock()
	}()
	n := wire.FrameSize(f)
	if _, err := p.bytes.Acquire(ctx, n, nil); err != nil {
		return err
	}
	select {
	case p.queue <- queued{f, n}:
		return nil
	case <-ctx.Done():
		p.bytes.Release(n)
		return ctx.Err()
	}
}

// drained reports, once the lane is closing, whether it may exit: nothing
// queued and no Send about to queue. Sends after it refuse.
func (p *Peer) drained() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sending > 0 || len(p.queue) > 0 {
		return false
	}
	p.closed = true
	return true
}

func (p *Peer) run(ctx context.Context) {
	defer close(p.done)
	defer func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
	}()
	var pendingFrame queued
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := p.stream(ctx, &pendingFrame)
		if err == nil || ctx.Err() != nil {
			return // closed after sending everything, or shut down
		}
		p.log.Warn("exchange stream failed; reopening", "Peer", p.addr, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < maxStreamBackoff {
			backoff *= 2
		}
	}
}

// closeWait bounds how long a closing lane waits for the receiver to
// acknowledge its last frames; a receiver stuck that long has stopped the
// task they were for.
const closeWait = 30 * time.Second

// stream opens one stream and sends until it fails (an error) or the lane
// has closed and sent everything (nil). A frame whose send failed is kept
// in *pending and sent first on the next stream; its bytes stay counted in
// the queue's budget until it is sent.
func (p *Peer) stream(ctx context.Context, pending *queued) error {
	conn, err := p.conn()
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := conn.NewStream(sctx, &exchangeDesc.Streams[0], exchangeMethod)
	if err != nil {
		return fmt.Errorf("open stream to %s: %w", p.addr, err)
	}
	draining := false
	for {
		q := *pending
		for q.f == nil && draining {
			select {
			case q = <-p.queue:
				continue
			default:
			}
			if p.drained() {
				return p.finish(sctx, cancel, st)
			}
			// A Send is about to queue: take its frame first.
			select {
			case <-ctx.Done():
				_ = st.CloseSend()
				return ctx.Err()
			case q = <-p.queue:
			case <-time.After(time.Millisecond):
			}
		}
		if q.f == nil {
			select {
			case <-ctx.Done():
				_ = st.CloseSend()
				return ctx.Err()
			case q = <-p.queue:
			case <-p.closing:
				draining = true
				continue
			}
		}
		if err := st.SendMsg(q.f); err != nil {
			*pending = q
			return fmt.Errorf("send to %s: %w", p.addr, err)
		}
		*pending = queued{}
		p.bytes.Release(q.n)
		q.f.Release() // encoded: the record array can be reused (the sending task reserved it)
	}
}

// finish ends a closing lane's stream: the receiver acknowledges once it
// has handed every frame on it to its task.
func (p *Peer) finish(sctx context.Context, cancel context.CancelFunc, st grpc.ClientStream) error {
	stop := time.AfterFunc(closeWait, cancel)
	defer stop.Stop()
	err := st.CloseSend()
	if err == nil {
		err = st.RecvMsg(&exchangeAck{})
	}
	if err != nil && sctx.Err() == nil {
		p.log.Warn("exchange lane closed without the receiver's acknowledgement", "Peer", p.addr, "err", err)
	}
	return nil
}
