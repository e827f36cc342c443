package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"koala/dataplane/transport"
	"koala/dataplane/wire"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// frameCodec carries Frames over gRPC in koala's own binary layout, so the
// exchange needs no generated protobuf code. It is a gRPC CodecV2: a frame is
// encoded into one buffer of its exact size taken from frameBufs (gRPC
// returns it once written), and a received message is copied out of
// gRPC's buffers once, into memory the decoded records may alias.
type frameCodec struct{}

func (frameCodec) Name() string { return "koala-frame" }

func (frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *wire.Frame:
		buf := wire.FrameBufs.Get(wire.FrameSize(m))
		*buf = wire.AppendFrame((*buf)[:0], m)
		return mem.BufferSlice{mem.NewBuffer(buf, &wire.FrameBufs)}, nil
	case *exchangeAck:
		return mem.BufferSlice{mem.SliceBuffer{m.status}}, nil
	case *fetchRequest:
		return mem.BufferSlice{mem.SliceBuffer(appendFetchRequest(nil, m))}, nil
	case *fetchReply:
		return mem.BufferSlice{mem.SliceBuffer(appendFetchReply(nil, m))}, nil
	}
	return nil, fmt.Errorf("koala-frame codec: cannot marshal %T", v)
}

func (frameCodec) Unmarshal(msg mem.BufferSlice, v any) error {
	// gRPC frees msg's buffers when Unmarshal returns; decoded records and
	// values alias data, so data is a copy of our own.
	data := msg.Materialize()
	switch m := v.(type) {
	case *wire.Frame:
		f, err := wire.DecodeFrame(data)
		if err != nil {
			return err
		}
		*m = *f
		return nil
	case *exchangeAck:
		if len(data) != 1 {
			return fmt.Errorf("koala-frame codec: ack of %d bytes", len(data))
		}
		m.status = data[0]
		return nil
	case *fetchRequest:
		r, err := decodeFetchRequest(data)
		if err != nil {
			return err
		}
		*m = *r
		return nil
	case *fetchReply:
		r, err := decodeFetchReply(data)
		if err != nil {
			return err
		}
		*m = *r
		return nil
	}
	return fmt.Errorf("koala-frame codec: cannot unmarshal into %T", v)
}

var _ encoding.CodecV2 = frameCodec{}

type exchangeAck struct{ status byte }

// frameHandler receives frames that arrive at this worker.
type frameHandler interface {
	deliverLocal(ctx context.Context, f *wire.Frame) error
}

const exchangeMethod = "/koala.Exchange/Send"

// maxMessageBytes bounds one gRPC message (frames, fetch replies).
const maxMessageBytes = 64 << 20

// Exchange streams carry batches of tens of KB back to back: a flow-control
// window of several batches and socket buffers that hold a whole batch let
// a frame go out in one write instead of waiting for window updates and
// flushing every 32 KB (HTTP/2 defaults), which showed as syscall time.
const (
	exchangeWindow   = 4 << 20
	exchangeIOBuffer = 256 << 10
)

var exchangeDesc = grpc.ServiceDesc{
	ServiceName: "koala.Exchange",
	HandlerType: (*frameHandler)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Fetch", Handler: fetchHandler}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Send",
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			h := srv.(frameHandler)
			for {
				f := new(wire.Frame)
				if err := stream.RecvMsg(f); err != nil {
					if errors.Is(err, io.EOF) {
						return stream.SendMsg(&exchangeAck{})
					}
					return err
				}
				if err := h.deliverLocal(stream.Context(), f); err != nil {
					return err
				}
			}
		},
	}},
}

// newExchangeServer builds the gRPC server that accepts frames for h.
// creds are the transport credentials (plaintext or TLS, see GRPCTLS).
func newExchangeServer(h frameHandler, creds credentials.TransportCredentials) *grpc.Server {
	s := grpc.NewServer(grpc.Creds(transport.OrPlaintext(creds)), grpc.ForceServerCodecV2(frameCodec{}), grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes),
		grpc.InitialWindowSize(exchangeWindow), grpc.InitialConnWindowSize(exchangeWindow), grpc.ReadBufferSize(exchangeIOBuffer), grpc.WriteBufferSize(exchangeIOBuffer))
	s.RegisterService(&exchangeDesc, h)
	return s
}

// peer is the ordered outbound stream to one remote worker. One goroutine
// sends, so frames to any task on that worker keep the order they were queued in.
type peer struct {
	addr   string
	creds  credentials.TransportCredentials
	queue  chan *wire.Frame
	log    *slog.Logger
	sent   atomic.Uint64
	failed atomic.Uint64
	done   chan struct{}
}

// peers holds one peer per remote address.
type peers struct {
	mu    sync.Mutex
	byAdr map[string]*peer
	ctx   context.Context
	log   *slog.Logger
	creds credentials.TransportCredentials
}

func newPeers(ctx context.Context, log *slog.Logger, creds credentials.TransportCredentials) *peers {
	return &peers{byAdr: map[string]*peer{}, ctx: ctx, log: log, creds: creds}
}

func (ps *peers) get(addr string) *peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.byAdr[addr]
	if !ok {
		p = &peer{addr: addr, creds: ps.creds, queue: make(chan *wire.Frame, 256), log: ps.log, done: make(chan struct{})}
		ps.byAdr[addr] = p
		go p.run(ps.ctx)
	}
	return p
}

// send queues f; it blocks when the peer is behind, which is how
// backpressure reaches the sending task.
func (p *peer) send(ctx context.Context, f *wire.Frame) error {
	select {
	case p.queue <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *peer) run(ctx context.Context) {
	defer close(p.done)
	var pendingFrame *wire.Frame
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := p.stream(ctx, &pendingFrame)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("exchange stream failed; reconnecting", "peer", p.addr, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 2*time.Second {
			backoff *= 2
		}
	}
}

// stream opens one stream and sends until it fails. A frame whose send
// failed is kept in *pending and sent first on the next stream.
func (p *peer) stream(ctx context.Context, pending **wire.Frame) error {
	conn, err := grpc.NewClient(p.addr,
		grpc.WithTransportCredentials(transport.OrPlaintext(p.creds)),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(frameCodec{}), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		grpc.WithInitialWindowSize(exchangeWindow), grpc.WithInitialConnWindowSize(exchangeWindow),
		grpc.WithReadBufferSize(exchangeIOBuffer), grpc.WithWriteBufferSize(exchangeIOBuffer))
	if err != nil {
		return fmt.Errorf("dial %s: %w", p.addr, err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := conn.NewStream(sctx, &exchangeDesc.Streams[0], exchangeMethod)
	if err != nil {
		return fmt.Errorf("open stream to %s: %w", p.addr, err)
	}
	for {
		f := *pending
		if f == nil {
			select {
			case <-ctx.Done():
				_ = st.CloseSend()
				return ctx.Err()
			case f = <-p.queue:
			}
		}
		if err := st.SendMsg(f); err != nil {
			*pending = f
			p.failed.Add(1)
			return fmt.Errorf("send to %s: %w", p.addr, err)
		}
		*pending = nil
		p.sent.Add(1)
		f.Release() // encoded: the record array can be reused (outputs.emitTo)
	}
}
