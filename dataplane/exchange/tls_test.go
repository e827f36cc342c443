package exchange

import (
	"context"
	"errors"
	"koala/dataplane/dptest/testpki"
	"koala/dataplane/transport"
	"koala/dataplane/wire"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
)

// recvFrames collects the frames an exchange server receives.
type recvFrames struct {
	mu     sync.Mutex
	frames []*wire.Frame
}

func (r *recvFrames) DeliverLocal(_ context.Context, f *wire.Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f)
	return nil
}

func (r *recvFrames) TakeState(*FetchRequest) (*FetchReply, error) {
	return nil, errors.New("no state here")
}

func (r *recvFrames) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
}

// serve runs an exchange server for h on a free loopback port until the
// test ends, and returns its address.
func serve(t *testing.T, h Handler, creds credentials.TransportCredentials) string {
	t.Helper()
	srv := NewServer(h, creds)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestExchangeOverTLS sends frames between two in-process peers over
// mutual TLS, and checks that clients without the CA or without a client
// certificate are refused.
func TestExchangeOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir, "koala")
	if err != nil {
		t.Fatal(err)
	}
	a, err := ca.Issue("worker-a", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Issue("worker-b", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := transport.GRPCTLS{Cert: a.CertFile, Key: a.KeyFile, CA: ca.CertFile, Mutual: true}
	screds, err := serverTLS.ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	recv := &recvFrames{}
	addr := serve(t, recv, screds)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frame := func(i int) *wire.Frame {
		return &wire.Frame{Kind: wire.FrameData, JobID: "j", FromTask: "a", ToTask: "b", Records: []wire.Record{{Key: []byte("k"), Value: []byte{byte(i)}, Offset: int64(i)}}}
	}

	// Refused: each stream attempt must fail and deliver nothing.
	for _, bad := range []struct {
		name string
		g    transport.GRPCTLS
		want string
	}{
		{"plaintext", transport.GRPCTLS{}, ""},
		{"unknown CA", transport.GRPCTLS{Cert: b.CertFile, Key: b.KeyFile, CA: other.CertFile}, "certificate"},
		{"no client certificate", transport.GRPCTLS{CA: ca.CertFile}, ""},
	} {
		creds, err := bad.g.ClientCredentials()
		if err != nil {
			t.Fatal(err)
		}
		p := newPeer(addr, creds, slog.New(slog.DiscardHandler), 4, peerQueueBytes)
		if err := p.Send(context.Background(), frame(0)); err != nil {
			t.Fatal(err)
		}
		var pending queued
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		err = p.stream(sctx, &pending)
		scancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: stream error %v, want a refusal mentioning %q", bad.name, err, bad.want)
		} else {
			t.Logf("%s refused: %v", bad.name, err)
		}
	}
	if n := recv.count(); n != 0 {
		t.Fatalf("refused clients delivered %d frames", n)
	}

	// Accepted: worker b with the CA and its own certificate.
	good := transport.GRPCTLS{Cert: b.CertFile, Key: b.KeyFile, CA: ca.CertFile, Mutual: true}
	ccreds, err := good.ClientCredentials()
	if err != nil {
		t.Fatal(err)
	}
	ps := NewPeers(ctx, slog.New(slog.DiscardHandler), ccreds)
	const n = 100
	for i := 0; i < n; i++ {
		if err := ps.Send(ctx, addr, frame(i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for recv.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames arrived over TLS within 20s", recv.count(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for i, f := range recv.frames {
		if len(f.Records) != 1 || f.Records[0].Offset != int64(i) || f.Records[0].Value[0] != byte(i) {
			t.Fatalf("frame %d arrived as %+v", i, f)
		}
	}
}
