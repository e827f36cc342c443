// Package transport owns how workers, the controller and the CLI reach
// NATS and each other's gRPC endpoints securely: NATS credentials and
// TLS, gRPC TLS credentials, and the redaction of secrets from URLs and
// errors so no log or reply carries a password.
//
// The controller, the workers and the state service all build their
// connection options here, so credentials are checked, loaded and redacted
// one way.
package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// NATSSecurity holds the credentials and TLS settings of a NATS client. The
// zero value connects without authentication and without TLS.
type NATSSecurity struct {
	// User and Password authenticate with user/password; Token with a
	// token; CredsFile with a NATS .creds file (JWT and nkey seed). At most
	// one of the three may be set.
	User, Password string
	Token          string
	CredsFile      string
	// TLSCA is a PEM bundle that verifies the server's certificate (empty:
	// the system roots). TLSCert and TLSKey are the client certificate, for
	// servers that verify clients. Any of the three turns TLS on.
	TLSCA, TLSCert, TLSKey string
}

// Validate names the first conflicting or incomplete settings.
func (s NATSSecurity) Validate() error {
	var errs []error
	if (s.User == "") != (s.Password == "") {
		errs = append(errs, errors.New("NATS user and password: set both or neither"))
	}
	methods := 0
	for _, set := range []bool{s.User != "", s.Token != "", s.CredsFile != ""} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		errs = append(errs, errors.New("NATS credentials: set only one of user/password, token or credentials file"))
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		errs = append(errs, fmt.Errorf("NATS TLS client certificate %q and key %q: set both or neither", s.TLSCert, s.TLSKey))
	}
	return errors.Join(errs...)
}

// TLSEnabled reports whether any TLS setting is present.
func (s NATSSecurity) TLSEnabled() bool { return s.TLSCA != "" || s.TLSCert != "" || s.TLSKey != "" }

// Options are the nats.Options that apply s.
func (s NATSSecurity) Options() ([]nats.Option, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	switch {
	case s.User != "":
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	case s.Token != "":
		opts = append(opts, nats.Token(s.Token))
	case s.CredsFile != "":
		if _, err := os.Stat(s.CredsFile); err != nil {
			return nil, fmt.Errorf("NATS credentials file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(s.CredsFile))
	}
	if s.TLSEnabled() {
		cfg, err := clientTLSConfig("NATS", s.TLSCA, s.TLSCert, s.TLSKey, "")
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, nil
}

// secrets are the strings that must never be printed.
func (s NATSSecurity) secrets() []string { return []string{s.Password, s.Token} }

// ConnectNATS connects to the NATS server(s) at url with s and extra
// options. Its error names NATS and the address, with any credentials
// (in s or in the URL) removed from both.
func ConnectNATS(url string, s NATSSecurity, extra ...nats.Option) (*nats.Conn, error) {
	opts, err := s.Options()
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", RedactURL(url), err)
	}
	nc, err := nats.Connect(url, append(opts, extra...)...)
	if err != nil {
		secrets := append(s.secrets(), urlSecrets(url)...)
		return nil, redactErr(fmt.Errorf("connect to NATS at %s: %w", RedactURL(url), natsHint(err)), secrets)
	}
	return nc, nil
}

// natsHint adds what to check to the errors an operator meets first.
func natsHint(err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return fmt.Errorf("%w (the server refused the credentials: check KOALA_NATS_USER/KOALA_NATS_PASSWORD, KOALA_NATS_TOKEN or KOALA_NATS_CREDS)", err)
	case errors.Is(err, nats.ErrSecureConnRequired):
		return fmt.Errorf("%w (set KOALA_NATS_TLS_CA)", err)
	}
	return err
}

// RedactURL returns a comma-separated list of URLs with any user
// information replaced: "nats://u:p@h:4222" becomes
// "nats://u:REDACTED@h:4222" and a bare token "nats://t@h" becomes
// "nats://REDACTED@h". Unparsable parts lose everything up to their last '@'.
func RedactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = redactOneURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactOneURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		if at := strings.LastIndex(s, "@"); at >= 0 {
			return "REDACTED" + s[at:]
		}
		return s
	}
	if u.User == nil {
		return s
	}
	if _, hasPass := u.User.Password(); hasPass {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	} else {
		u.User = url.User("REDACTED")
	}
	return u.String()
}

// urlSecrets are the passwords and tokens embedded in a URL list.
func urlSecrets(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		} else {
			out = append(out, u.User.Username())
		}
	}
	return out
}

// redactedError prints its cause with secrets replaced, and still unwraps
// to it for errors.Is.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

func redactErr(err error, secrets []string) error {
	msg := err.Error()
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "REDACTED")
		}
	}
	return &redactedError{msg: msg, cause: err}
}

// GRPCTLS configures TLS of the data-plane gRPC services (record exchange,
// state fetch, the remote state service). The zero value is plaintext,
// which is only meant for loopback.
type GRPCTLS struct {
	// Cert and Key are this process's certificate: servers present it, and
	// clients present it when the server verifies clients (Mutual).
	Cert, Key string
	// CA is a PEM bundle that verifies peers: clients verify servers with
	// it, and servers verify clients with it when Mutual is set. Empty
	// means the system roots for clients.
	CA string
	// Mutual makes servers require a client certificate signed by CA.
	Mutual bool
	// ServerName, if set, is the name clients verify in server
	// certificates instead of the dialled host.
	ServerName string
}

// Enabled reports whether TLS is configured at all.
func (g GRPCTLS) Enabled() bool { return g.Cert != "" || g.Key != "" || g.CA != "" }

// Validate names the first incomplete setting.
func (g GRPCTLS) Validate() error {
	var errs []error
	if (g.Cert == "") != (g.Key == "") {
		errs = append(errs, fmt.Errorf("gRPC TLS certificate %q and key %q: set both or neither", g.Cert, g.Key))
	}
	if g.Mutual && (g.CA == "" || g.Cert == "") {
		errs = append(errs, errors.New("gRPC mutual TLS: needs the CA and this process's certificate and key"))
	}
	if !g.Enabled() && (g.Mutual || g.ServerName != "") {
		errs = append(errs, errors.New("gRPC TLS options set without a certificate or CA"))
	}
	return errors.Join(errs...)
}

// ServerCredentials are the transport credentials of a gRPC server:
// plaintext when TLS is off, otherwise Cert/Key and, with Mutual, client
// verification against CA.
func (g GRPCTLS) ServerCredentials() (credentials.TransportCredentials, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if !g.Enabled() {
		return insecure.NewCredentials(), nil
	}
	if g.Cert == "" {
		return nil, errors.New("gRPC TLS server: needs a certificate and key (KOALA_GRPC_TLS_CERT, KOALA_GRPC_TLS_KEY), not only a CA")
	}
	cert, err := tls.LoadX509KeyPair(g.Cert, g.Key)
	if err != nil {
		return nil, fmt.Errorf("gRPC TLS server certificate %s / key %s: %w", g.Cert, g.Key, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if g.Mutual {
		pool, err := loadCAPool("gRPC", g.CA)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}

// ClientCredentials are the transport credentials of a gRPC client:
// plaintext when TLS is off, otherwise server verification against CA and,
// when a certificate is set, that certificate for mutual TLS.
func (g GRPCTLS) ClientCredentials() (credentials.TransportCredentials, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if !g.Enabled() {
		return insecure.NewCredentials(), nil
	}
	cfg, err := clientTLSConfig("gRPC", g.CA, g.Cert, g.Key, g.ServerName)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// clientTLSConfig verifies servers with the CA bundle at ca (system roots
// when empty) and presents cert/key when set.
func clientTLSConfig(what, ca, cert, key, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ca != "" {
		pool, err := loadCAPool(what, ca)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s TLS client certificate %s / key %s: %w", what, cert, key, err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return cfg, nil
}

func loadCAPool(what, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s TLS CA: %w", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s TLS CA %s: no PEM certificate in it", what, path)
	}
	return pool, nil
}

// OrPlaintext is creds, or plaintext when unset (workers built without
// NewWorker in tests).
func OrPlaintext(creds credentials.TransportCredentials) credentials.TransportCredentials {
	if creds == nil {
		return insecure.NewCredentials()
	}
	return creds
}

// WarnPlaintext logs when a plaintext service listens beyond loopback:
// allowed (a private network may be trusted) but worth a line in the log.
func WarnPlaintext(log *slog.Logger, what string, addr net.Addr, g GRPCTLS) {
	if g.Enabled() {
		return
	}
	if ta, ok := addr.(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
		log.Warn(what+" listens beyond loopback without TLS; set KOALA_GRPC_TLS_CERT/KEY/CA to encrypt it", "addr", addr.String())
	}
}
