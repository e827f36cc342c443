package transport

import (
	"errors"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"koala/dataplane/dptest/testnats"
	"koala/dataplane/dptest/testpki"
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

func TestConnectNATSWithPassword(t *testing.T) {
	const password = "pa55-w0rd-xyz"
	ns := testnats.Start(t, &natsserver.Options{Username: "koala", Password: password})
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
	ns := testnats.Start(t, &natsserver.Options{Authorization: "tok-123"})
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
	ns := testnats.Start(t, &natsserver.Options{TLS: true, TLSConfig: tc, TLSVerify: true, TLSTimeout: 5})
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
