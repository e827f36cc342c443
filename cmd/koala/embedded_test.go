package main

import (
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/pflag"

	"koala/dataplane/dptest/testpki"
	"koala/dataplane/transport"
	"koala/deploy/embedded"
)

// startEmbeddedNATS starts the server `koala nats-server` would run with c.
func startEmbeddedNATS(t *testing.T, c embedded.NATSConfig) (*natsserver.Server, *natsserver.Options) {
	t.Helper()
	opts, err := embedded.NATSOptions(c)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLog = true
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("embedded NATS not ready")
	}
	return ns, opts
}

func TestNATSServerRequiresCredentials(t *testing.T) {
	const pw = "embedded-pw-42"
	ns, opts := startEmbeddedNATS(t, embedded.NATSConfig{Addr: "127.0.0.1:-1", User: "koala", Password: pw})
	addr := ns.Addr().String()
	url := "nats://" + addr

	_, err := dialNATS(url, transport.NATSSecurity{}, "test")
	if err == nil {
		t.Fatal("connected without credentials")
	}
	if msg := err.Error(); !strings.Contains(msg, "NATS") || !strings.Contains(msg, addr) || !strings.Contains(msg, "Authorization") {
		t.Errorf("error %q: want it to name NATS, %s and the authorization failure", msg, addr)
	}
	nc, err := dialNATS(url, transport.NATSSecurity{User: "koala", Password: pw}, "test")
	if err != nil {
		t.Fatalf("with credentials: %v", err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := embedded.NATSAuthSummary(opts); strings.Contains(got, pw) || !strings.Contains(got, "user koala") {
		t.Errorf("auth summary %q", got)
	}
}

func TestNATSServerTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir, "nats")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("nats-server", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := startEmbeddedNATS(t, embedded.NATSConfig{Addr: "127.0.0.1:-1", Token: "tok", TLSCert: srv.CertFile, TLSKey: srv.KeyFile})
	url := "nats://" + ns.Addr().String()
	if _, err := dialNATS(url, transport.NATSSecurity{Token: "tok"}, "test"); err == nil {
		t.Error("connected without the CA")
	}
	nc, err := dialNATS(url, transport.NATSSecurity{Token: "tok", TLSCA: ca.CertFile}, "test")
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Error("not TLS")
	}
}

func TestNATSServerOptionsRejectBadConfig(t *testing.T) {
	for _, tc := range []struct {
		c    embedded.NATSConfig
		want string
	}{
		{embedded.NATSConfig{Addr: "127.0.0.1"}, "--addr"},
		{embedded.NATSConfig{Addr: "127.0.0.1:-1", User: "u"}, "--user and --password"},
		{embedded.NATSConfig{Addr: "127.0.0.1:-1", User: "u", Password: "p", Token: "t"}, "not both"},
		{embedded.NATSConfig{Addr: "127.0.0.1:-1", TLSCert: "c.pem"}, "--tls-key"},
		{embedded.NATSConfig{Addr: "127.0.0.1:-1", TLSCA: "ca.pem"}, "--tls-ca needs"},
		{embedded.NATSConfig{Addr: "127.0.0.1:-1", TLSCert: "/nonexistent.pem", TLSKey: "/nonexistent-key.pem"}, "/nonexistent.pem"},
	} {
		_, err := embedded.NATSOptions(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.c, err, tc.want)
		}
	}
}

// Secrets set in the environment must not show in --help output, which
// prints flag defaults. The flags are built after the environment is set.
func TestHelpDoesNotPrintSecrets(t *testing.T) {
	t.Setenv(envNATSPassword, "env-secret-pw")
	t.Setenv(envNATSToken, "env-secret-token")
	t.Setenv(envNATSUser, "env-user")
	var s transport.NATSSecurity
	fs := pflag.NewFlagSet("client", pflag.ContinueOnError)
	addNATSSecurityFlags(fs, &s)
	for name, usage := range map[string]string{"nats-server": newNATSServerCmd().Flags().FlagUsages(), "client flags": fs.FlagUsages()} {
		if strings.Contains(usage, "env-secret") {
			t.Errorf("%s --help shows a secret from the environment:\n%s", name, usage)
		}
		if !strings.Contains(usage, "env-user") {
			t.Errorf("%s --help lacks the user from the environment (flags built before Setenv?):\n%s", name, usage)
		}
	}
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	resolveNATSSecrets(&s)
	if s.User != "env-user" || s.Password != "env-secret-pw" || s.Token != "env-secret-token" {
		t.Errorf("settings from the environment not applied: %+v", s)
	}
}
