// Package exchange owns the worker-to-worker gRPC service: the ordered
// streams of frames from one worker to another (one per destination task,
// so frames to a task keep the order they were queued in, a full stream is
// how that task's backpressure reaches the sender, and a busy task holds
// up no other; see peers.go), the state-fetch call new owners
// use to take values from old owners, their binary codec, and a loopback
// pair that measures and tests the path without tasks. It calls the
// runtime only through the Handler interface.
package exchange

import (
	"context"
	"errors"
	"fmt"
	"io"
	"koala/dataplane/transport"
	"koala/dataplane/wire"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// codec carries Frames over gRPC in koala's own binary layout, so the
// exchange needs no generated protobuf code. It is a gRPC CodecV2: a frame is
// encoded into one buffer of its exact size taken from frameBufs (gRPC
// returns it once written), and a received message is copied out of
// gRPC's buffers once, into memory the decoded records may alias.
type codec struct{}

func (codec) Name() string { return "koala-frame" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *wire.Frame:
		buf := wire.FrameBufs.Get(wire.FrameSize(m))
		*buf = wire.AppendFrame((*buf)[:0], m)
		return mem.BufferSlice{mem.NewBuffer(buf, &wire.FrameBufs)}, nil
	case *exchangeAck:
		return mem.BufferSlice{mem.SliceBuffer{m.status}}, nil
	case *FetchRequest:
		return mem.BufferSlice{mem.SliceBuffer(AppendFetchRequest(nil, m))}, nil
	case *FetchReply:
		return mem.BufferSlice{mem.SliceBuffer(AppendFetchReply(make([]byte, 0, FetchReplySize(m)), m))}, nil
	}
	return nil, fmt.Errorf("koala-frame codec: cannot marshal %T", v)
}

func (codec) Unmarshal(msg mem.BufferSlice, v any) error {
	if m, ok := v.(*FetchReply); ok {
		// A fetch reply's decoding copies what it keeps (each value its
		// own allocation, which the fetching task's store may keep), so
		// it reads gRPC's buffer in place: a reply carries megabytes of
		// values, and a copy of all of them first was wasted.
		var data []byte
		if len(msg) == 1 {
			data = msg[0].ReadOnlyData()
		} else {
			buf := msg.MaterializeToBuffer(mem.DefaultBufferPool())
			defer buf.Free()
			data = buf.ReadOnlyData()
		}
		r, err := DecodeFetchReply(data)
		if err != nil {
			return err
		}
		*m = *r
		return nil
	}
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
	case *FetchRequest:
		r, err := DecodeFetchRequest(data)
		if err != nil {
			return err
		}
		*m = *r
		return nil
	}
	return fmt.Errorf("koala-frame codec: cannot unmarshal into %T", v)
}

var _ encoding.CodecV2 = codec{}

type exchangeAck struct{ status byte }

// Handler is the runtime side of a worker's exchange server.
type Handler interface {
	// DeliverLocal hands a frame that arrived to a local task, blocking
	// while the task is behind.
	DeliverLocal(ctx context.Context, f *wire.Frame) error
	// TakeState serves a state fetch from a local task's store.
	TakeState(req *FetchRequest) (*FetchReply, error)
}

const exchangeMethod = "/koala.Exchange/Send"

// maxMessageBytes bounds one gRPC message (frames, fetch replies); it
// matches wire's largest frame buffer.
const maxMessageBytes = 64 << 20

// Exchange streams carry batches of tens of KB back to back: a flow-control
// window of several batches and socket buffers that hold a whole batch let
// a frame go out in one write instead of waiting for window updates and
// flushing every 32 KB (HTTP/2 defaults), which showed as syscall time.
const (
	exchangeWindow   = 4 << 20
	exchangeIOBuffer = 256 << 10
)

// Each Peer's queue is bounded twice: peerQueueFrames frames, and
// peerQueueBytes of encoded frames (a frame is admitted while less than
// that is queued). Frames alone let a queue of whole batches hold ~250 K
// records, seconds of work for a slow receiver, which every route barrier
// sent behind them had to wait out (taxi's lazy swap-routes: 9.4 s under
// overload). 1 MiB is several frames of most queries, and the stream's
// flow-control window (exchangeWindow) keeps up to 4 MiB more in flight.
const (
	peerQueueFrames = 256
	peerQueueBytes  = 1 << 20
)

var exchangeDesc = grpc.ServiceDesc{
	ServiceName: "koala.Exchange",
	HandlerType: (*Handler)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Fetch", Handler: fetchHandler}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Send",
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			h := srv.(Handler)
			for {
				f := new(wire.Frame)
				if err := stream.RecvMsg(f); err != nil {
					if errors.Is(err, io.EOF) {
						return stream.SendMsg(&exchangeAck{})
					}
					return err
				}
				if err := h.DeliverLocal(stream.Context(), f); err != nil {
					return err
				}
			}
		},
	}},
}

// NewServer builds the gRPC server that accepts frames and fetches for h.
// creds are the transport credentials (nil: plaintext; see
// transport.GRPCTLS).
func NewServer(h Handler, creds credentials.TransportCredentials) *grpc.Server {
	s := grpc.NewServer(grpc.Creds(transport.OrPlaintext(creds)), grpc.ForceServerCodecV2(codec{}), grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes),
		grpc.InitialWindowSize(exchangeWindow), grpc.InitialConnWindowSize(exchangeWindow), grpc.ReadBufferSize(exchangeIOBuffer), grpc.WriteBufferSize(exchangeIOBuffer))
	s.RegisterService(&exchangeDesc, h)
	return s
}
