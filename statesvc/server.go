package statesvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// DefaultServerListen is where `koala statesvc` listens unless told otherwise.
const DefaultServerListen = "127.0.0.1:7600"

// Scan paging bounds the server enforces whatever the client asks for.
const (
	serverMaxScanPairs = 1 << 16
	serverMaxScanBytes = 16 << 20
)

// ServerOptions configure a state server.
type ServerOptions struct {
	// Dir is the Pebble directory (required).
	Dir string
	// Listen is the host:port to bind; "" means DefaultServerListen and a
	// missing host (":7600") means 127.0.0.1: exposing the unauthenticated
	// service on other interfaces takes an explicit host such as 0.0.0.0.
	Listen string
	// Listener, if set, is served instead of binding Listen (tests).
	Listener net.Listener
	// Creds are the transport credentials (TLS, mutual TLS); nil means
	// plaintext, meant for loopback.
	Creds credentials.TransportCredentials
	// CacheBytes and MemTableBytes size Pebble as in Options (0 = defaults).
	CacheBytes    int64
	MemTableBytes int64
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Server serves one Pebble store over gRPC as the "koala.State" service:
// unary MultiGet, MultiPut, Scan (paged), DeleteRange and Size. The
// MultiPut of one request is one Pebble batch: gRPC hands the handler a
// request only once its whole message arrived, so a client that disconnects
// mid-request either applied all of its batch or none of it.
type Server struct {
	store *Pebble
	grpc  *grpc.Server
	lis   net.Listener
	log   *slog.Logger

	done     chan struct{}
	serveMu  sync.Mutex
	serveErr error

	closeOnce sync.Once
	closeErr  error
}

// NewServer opens the store, binds the listener and starts serving in the
// background. Stop it with Close or Shutdown; Wait blocks until it stopped.
func NewServer(o ServerOptions) (*Server, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	lis := o.Listener
	if lis == nil {
		addr, err := serverListenAddr(o.Listen)
		if err != nil {
			return nil, err
		}
		if lis, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("statesvc: server listen on %s: %w", addr, err)
		}
	}
	creds := o.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	store, err := OpenPebble(Options{Backend: BackendPebble, Dir: o.Dir, CacheBytes: o.CacheBytes, MemTableBytes: o.MemTableBytes, Logger: log})
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	s := &Server{
		store: store,
		lis:   lis,
		log:   log.With("component", "statesvc-server", "addr", lis.Addr().String()),
		done:  make(chan struct{}),
		grpc: grpc.NewServer(grpc.Creds(creds), grpc.ForceServerCodecV2(stateCodec{}),
			grpc.MaxRecvMsgSize(maxStateMessageBytes), grpc.MaxSendMsgSize(maxStateMessageBytes)),
	}
	s.grpc.RegisterService(&stateServiceDesc, s)
	go func() {
		defer close(s.done)
		err := s.grpc.Serve(lis)
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
		s.serveMu.Lock()
		s.serveErr = err
		s.serveMu.Unlock()
		if err != nil {
			s.log.Error("state server stopped serving", "err", err)
		}
	}()
	return s, nil
}

// serverListenAddr applies the defaults of ServerOptions.Listen.
func serverListenAddr(listen string) (string, error) {
	if listen == "" {
		return DefaultServerListen, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("statesvc: server listen address %q: want host:port: %w", listen, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Addr is the address the server listens on (host:port).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Wait blocks until the server stopped serving and returns why (nil after
// Close or Shutdown).
func (s *Server) Wait() error {
	<-s.done
	s.serveMu.Lock()
	defer s.serveMu.Unlock()
	return s.serveErr
}

// Shutdown stops accepting calls, lets running calls finish until ctx is
// done (then cuts them), and closes the store. Idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		graceful := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(graceful)
		}()
		select {
		case <-graceful:
		case <-ctx.Done():
			s.log.Warn("state server: graceful stop timed out; cutting running calls", "err", ctx.Err())
			s.grpc.Stop()
			<-graceful
		}
		<-s.done
		s.closeErr = s.store.Close()
	})
	return s.closeErr
}

// Close is Shutdown with a 10 s grace period.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Shutdown(ctx)
}

// stateServer is the handler type of stateServiceDesc.
type stateServer interface {
	multiGet(*getReq) (*getResp, error)
}

var stateServiceDesc = grpc.ServiceDesc{
	ServiceName: stateService,
	HandlerType: (*stateServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "MultiGet", Handler: unary(func(s *Server, r *getReq) (any, error) { return s.multiGet(r) })},
		{MethodName: "MultiPut", Handler: unary(func(s *Server, r *putReq) (any, error) { return s.multiPut(r) })},
		{MethodName: "Scan", Handler: unary(func(s *Server, r *scanReq) (any, error) { return s.scan(r) })},
		{MethodName: "DeleteRange", Handler: unary(func(s *Server, r *rangeReq) (any, error) { return s.deleteRange(r) })},
		{MethodName: "Size", Handler: unary(func(s *Server, r *sizeReq) (any, error) { return &sizeResp{size: s.store.ApproxSize()}, nil })},
	},
}

// unary adapts a typed handler to grpc.MethodDesc; Req is a struct type
// whose pointer the codec decodes.
func unary[Req any](h func(*Server, *Req) (any, error)) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		req := new(Req)
		if err := dec(req); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		out, err := h(srv.(*Server), req)
		if err != nil {
			return nil, toStatus(err)
		}
		return out, nil
	}
}

func toStatus(err error) error {
	if errors.Is(err, ErrClosed) {
		return status.Error(codes.Unavailable, "statesvc: state server is shutting down")
	}
	return status.Error(codes.Internal, err.Error())
}

func (s *Server) multiGet(r *getReq) (*getResp, error) {
	vals, err := s.store.MultiGet(r.keys)
	if err != nil {
		return nil, err
	}
	return &getResp{vals: vals}, nil
}

// multiPut applies the request as one atomic Pebble batch.
func (s *Server) multiPut(r *putReq) (*emptyResp, error) {
	if err := s.store.MultiPut(r.kvs); err != nil {
		return nil, err
	}
	return &emptyResp{}, nil
}

// scan returns up to limit pairs (and about maxBytes) from [start, end) and
// the key to continue from, or nil next when the range is exhausted. A page
// holds at least one pair when any is left.
func (s *Server) scan(r *scanReq) (*scanResp, error) {
	limit := r.limit
	if limit <= 0 || limit > serverMaxScanPairs {
		limit = serverMaxScanPairs
	}
	maxBytes := r.maxBytes
	if maxBytes <= 0 || maxBytes > serverMaxScanBytes {
		maxBytes = serverMaxScanBytes
	}
	var (
		arena []byte
		offs  []int // key end, value end per pair
		next  []byte
	)
	err := s.store.Scan(r.start, r.end, func(k, v []byte) bool {
		if n := len(offs) / 2; n >= limit || (n > 0 && len(arena) >= maxBytes) {
			next = append([]byte(nil), k...)
			return false
		}
		arena = append(arena, k...)
		offs = append(offs, len(arena))
		arena = append(arena, v...)
		offs = append(offs, len(arena))
		return true
	})
	if err != nil {
		return nil, err
	}
	out := &scanResp{keys: make([][]byte, len(offs)/2), vals: make([][]byte, len(offs)/2), next: next}
	if arena == nil {
		arena = []byte{} // empty values stay non-nil
	}
	start := 0
	for i := range out.keys {
		ke, ve := offs[2*i], offs[2*i+1]
		out.keys[i], out.vals[i] = arena[start:ke:ke], arena[ke:ve:ve]
		start = ve
	}
	return out, nil
}

func (s *Server) deleteRange(r *rangeReq) (*emptyResp, error) {
	if err := s.store.DeleteRange(r.start, r.end); err != nil {
		return nil, err
	}
	return &emptyResp{}, nil
}
