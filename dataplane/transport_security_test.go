package dataplane

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"koala/dataplane/dptest/testpki"
	"koala/dataplane/wire"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@10.0.0.1:4222", "nats://alice:REDACTED@10.0.0.1:4222"},
		{"nats://tok3n@10.0.0.1:4222", "nats://REDACTED@10.0.0.1:4222"},
		{"nats://a:p1@h1:4222, nats://a:p2@h2:4222", "nats://a:REDACTED@h1:4222,nats://a:REDACTED@h2:4222"},
		{"a:p@h:1", "REDACTED@h:1"},
		{"", ""},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNATSSecurityValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    NATSSecurity
		want string // substring of the error, "" = valid
	}{
		{"zero", NATSSecurity{}, ""},
		{"user and password", NATSSecurity{User: "u", Password: "p"}, ""},
		{"user without password", NATSSecurity{User: "u"}, "user and password"},
		{"password without user", NATSSecurity{Password: "p"}, "user and password"},
		{"token and user", NATSSecurity{User: "u", Password: "p", Token: "t"}, "only one of"},
		{"token and creds", NATSSecurity{Token: "t", CredsFile: "/x.creds"}, "only one of"},
		{"cert without key", NATSSecurity{TLSCert: "c.pem"}, "set both or neither"},
	} {
		err := tc.s.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestGRPCTLSValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    GRPCTLS
		want string
	}{
		{"plaintext", GRPCTLS{}, ""},
		{"server", GRPCTLS{Cert: "c", Key: "k", CA: "ca"}, ""},
		{"cert without key", GRPCTLS{Cert: "c", CA: "ca"}, "set both or neither"},
		{"mutual without CA", GRPCTLS{Cert: "c", Key: "k", Mutual: true}, "mutual TLS"},
		{"mutual without TLS", GRPCTLS{Mutual: true}, "without a certificate or CA"},
	} {
		err := tc.g.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// startNATS runs an in-process NATS server on a free loopback port.
func startNATS(t *testing.T, opts *natsserver.Options) *natsserver.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	return ns
}

func TestConnectNATSWithPassword(t *testing.T) {
	const password = "pa55-w0rd-xyz"
	ns := startNATS(t, &natsserver.Options{Username: "koala", Password: password})
	url := ns.ClientURL()
	addr := strings.TrimPrefix(url, "nats://")

	_, err := ConnectNATS(url, NATSSecurity{}, nats.Timeout(2*time.Second))
	if err == nil {
		t.Fatal("connecting without credentials succeeded")
	}
	if !strings.Contains(err.Error(), "NATS") || !strings.Contains(err.Error(), addr) || !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("error without credentials %q: want it to name NATS and %s and wrap nats.ErrAuthorization", err, addr)
	}
	t.Logf("without credentials: %v", err)

	// A wrong password in the URL: the error must not print it.
	withURLPass := strings.Replace(url, "nats://", "nats://koala:"+password+"-wrong@", 1)
	_, err = ConnectNATS(withURLPass, NATSSecurity{}, nats.Timeout(2*time.Second))
	if err == nil {
		t.Fatal("connecting with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("error %q contains the password", err)
	}

	nc, err := ConnectNATS(url, NATSSecurity{User: "koala", Password: password}, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("with credentials: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestConnectNATSWithToken(t *testing.T) {
	ns := startNATS(t, &natsserver.Options{Authorization: "tok-123"})
	if _, err := ConnectNATS(ns.ClientURL(), NATSSecurity{Token: "other"}, nats.Timeout(2*time.Second)); err == nil || strings.Contains(err.Error(), "other") {
		t.Errorf("wrong token: err = %v, want a refusal that does not print the token", err)
	}
	nc, err := ConnectNATS(ns.ClientURL(), NATSSecurity{Token: "tok-123"}, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	nc.Close()
}

func TestConnectNATSOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir, "nats")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("server", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Issue("client")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := natsserver.GenTLSConfig(&natsserver.TLSConfigOpts{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CaFile: ca.CertFile, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := startNATS(t, &natsserver.Options{TLS: true, TLSConfig: tc, TLSVerify: true, TLSTimeout: 5})
	url := ns.ClientURL()

	for _, bad := range []struct {
		name string
		s    NATSSecurity
	}{
		{"no TLS", NATSSecurity{}},
		{"unknown CA", NATSSecurity{TLSCA: other.CertFile, TLSCert: cli.CertFile, TLSKey: cli.KeyFile}},
		{"no client certificate", NATSSecurity{TLSCA: ca.CertFile}},
	} {
		nc, err := ConnectNATS(url, bad.s, nats.Timeout(2*time.Second))
		if err == nil {
			// A missing client certificate may only show at the first round trip.
			err = nc.Flush()
			nc.Close()
		}
		if err == nil {
			t.Errorf("%s: connected", bad.name)
		} else {
			t.Logf("%s: %v", bad.name, err)
		}
	}
	nc, err := ConnectNATS(url, NATSSecurity{TLSCA: ca.CertFile, TLSCert: cli.CertFile, TLSKey: cli.KeyFile}, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("with the CA and a client certificate: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if !nc.TLSRequired() {
		t.Error("connection is not TLS")
	}
}

// syncBuffer is a log sink safe for the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWorkerLogsNoPassword(t *testing.T) {
	const password = "w0rker-s3cret-pw"
	ns := startNATS(t, &natsserver.Options{Username: "koala", Password: password})
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	// The password both in the URL and in the options, as operators do.
	url := strings.Replace(ns.ClientURL(), "nats://", "nats://koala:"+password+"@", 1)
	w, err := NewWorker(Options{ID: "w1", NATSURL: url, NATSSecurity: NATSSecurity{User: "koala", Password: password}, DataDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "worker ready") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no \"worker ready\" in the log within 10s:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if strings.Contains(out, password) {
		t.Errorf("worker log contains the NATS password:\n%s", out)
	}
	if !strings.Contains(out, "koala:REDACTED@") {
		t.Errorf("worker log does not show the redacted NATS URL:\n%s", out)
	}

	// A refused connection: the error names the address but not the password.
	_, err = NewWorker(Options{ID: "w2", NATSURL: ns.ClientURL(), NATSSecurity: NATSSecurity{User: "koala", Password: password + "x"}, Logger: log})
	if err == nil || strings.Contains(err.Error(), password) || !strings.Contains(err.Error(), "NATS") {
		t.Errorf("wrong password: err = %v", err)
	}
}

// recvFrames collects the frames an exchange server receives.
type recvFrames struct {
	mu     sync.Mutex
	frames []*wire.Frame
}

func (r *recvFrames) deliverLocal(_ context.Context, f *wire.Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f)
	return nil
}

func (r *recvFrames) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.frames)
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
	serverTLS := GRPCTLS{Cert: a.CertFile, Key: a.KeyFile, CA: ca.CertFile, Mutual: true}
	screds, err := serverTLS.ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	recv := &recvFrames{}
	srv := newExchangeServer(recv, screds)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	addr := lis.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frame := func(i int) *wire.Frame {
		return &wire.Frame{Kind: wire.FrameData, JobID: "j", FromTask: "a", ToTask: "b", Records: []Record{{Key: []byte("k"), Value: []byte{byte(i)}, Offset: int64(i)}}}
	}

	// Refused: each stream attempt must fail and deliver nothing.
	for _, bad := range []struct {
		name string
		g    GRPCTLS
		want string
	}{
		{"plaintext", GRPCTLS{}, ""},
		{"unknown CA", GRPCTLS{Cert: b.CertFile, Key: b.KeyFile, CA: other.CertFile}, "certificate"},
		{"no client certificate", GRPCTLS{CA: ca.CertFile}, ""},
	} {
		creds, err := bad.g.ClientCredentials()
		if err != nil {
			t.Fatal(err)
		}
		p := &peer{addr: addr, creds: creds, queue: make(chan *wire.Frame, 4), log: slog.New(slog.DiscardHandler), done: make(chan struct{})}
		p.queue <- frame(0)
		var pending *wire.Frame
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
	good := GRPCTLS{Cert: b.CertFile, Key: b.KeyFile, CA: ca.CertFile, Mutual: true}
	ccreds, err := good.ClientCredentials()
	if err != nil {
		t.Fatal(err)
	}
	ps := newPeers(ctx, slog.New(slog.DiscardHandler), ccreds)
	const n = 100
	for i := 0; i < n; i++ {
		if err := ps.get(addr).send(ctx, frame(i)); err != nil {
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
