package statesvc_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"koala/dataplane/dptest/testpki"
	"koala/dataplane/transport"
	"koala/statesvc"
)

// TestRemoteOverMutualTLS serves the state service with TLS requiring client
// certificates: a client with the CA and a certificate reads its writes, a
// client without the CA is refused.
func TestRemoteOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir, "state")
	if err != nil {
		t.Fatal(err)
	}
	srvPair, err := ca.Issue("statesvc", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cliPair, err := ca.Issue("worker")
	if err != nil {
		t.Fatal(err)
	}
	screds, err := transport.GRPCTLS{Cert: srvPair.CertFile, Key: srvPair.KeyFile, CA: ca.CertFile, Mutual: true}.ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := statesvc.NewServer(statesvc.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0", Creds: screds, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })

	open := func(g transport.GRPCTLS) *statesvc.Remote {
		creds, err := g.ClientCredentials()
		if err != nil {
			t.Fatal(err)
		}
		r, err := statesvc.OpenRemote([]string{srv.Addr()}, statesvc.RemoteOptions{Namespace: "tls-job", Creds: creds, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}

	bad := open(transport.GRPCTLS{})
	if err := bad.MultiPut([]statesvc.KV{{Key: []byte("k"), Value: []byte("plain")}}); err == nil {
		t.Error("a plaintext client wrote to the TLS state service")
	} else if !strings.Contains(err.Error(), srv.Addr()) {
		t.Errorf("plaintext client error %q does not name the server %s", err, srv.Addr())
	}
	noCert := open(transport.GRPCTLS{CA: ca.CertFile})
	if _, err := noCert.MultiGet([][]byte{[]byte("k")}); err == nil {
		t.Error("a client without a certificate read from the mutual-TLS state service")
	}

	good := open(transport.GRPCTLS{Cert: cliPair.CertFile, Key: cliPair.KeyFile, CA: ca.CertFile, Mutual: true})
	if err := good.MultiPut([]statesvc.KV{{Key: []byte("k"), Value: []byte("v1")}}); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	vals, err := good.MultiGet([][]byte{[]byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 1 || !bytes.Equal(vals[0], []byte("v1")) {
		t.Fatalf("read back %q, want v1", vals)
	}
}
