package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kfake"
)

// NATSConfig is what `koala nats-server` serves: where, with which
// credentials and which TLS.
type NATSConfig struct {
	Addr            string // host:port; port -1 picks a free one (tests)
	User, Password  string
	Token           string
	TLSCert, TLSKey string
	TLSCA           string // set: clients must present a certificate it signed
	Debug           bool
}

// NATSOptions turns c into nats-server options, naming the flag of
// any bad or incomplete setting.
func NATSOptions(c NATSConfig) (*server.Options, error) {
	host, port, err := SplitHostPort(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("nats-server: --addr: %w", err)
	}
	opts := &server.Options{
		ServerName: "koala-nats",
		Host:       host,
		Port:       port,
		HTTPPort:   0, // no monitoring endpoint
		JetStream:  false,
		NoSigs:     true, // we handle signals ourselves
		Debug:      c.Debug,
		Logtime:    true,
		MaxPayload: 8 << 20,
	}
	if (c.User == "") != (c.Password == "") {
		return nil, errors.New("nats-server: --user and --password (KOALA_NATS_USER, KOALA_NATS_PASSWORD): set both or neither")
	}
	if c.User != "" && c.Token != "" {
		return nil, errors.New("nats-server: set either --user/--password or --token, not both")
	}
	opts.Username, opts.Password, opts.Authorization = c.User, c.Password, c.Token
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, fmt.Errorf("nats-server: --tls-cert %q and --tls-key %q: set both or neither", c.TLSCert, c.TLSKey)
	}
	if c.TLSCA != "" && c.TLSCert == "" {
		return nil, errors.New("nats-server: --tls-ca needs --tls-cert and --tls-key")
	}
	if c.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: c.TLSCert, KeyFile: c.TLSKey, CaFile: c.TLSCA, Verify: c.TLSCA != "",
		})
		if err != nil {
			return nil, fmt.Errorf("nats-server: TLS from --tls-cert %s, --tls-key %s, --tls-ca %q: %w", c.TLSCert, c.TLSKey, c.TLSCA, err)
		}
		opts.TLS, opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = true, tc, c.TLSCA != "", 5
	}
	return opts, nil
}

// NATSAuthSummary says how clients authenticate, without secrets.
func NATSAuthSummary(o *server.Options) string {
	auth := "no authentication"
	switch {
	case o.Username != "":
		auth = "user " + o.Username + " with password"
	case o.Authorization != "":
		auth = "token"
	}
	switch {
	case o.TLSVerify:
		auth += ", TLS with client certificates"
	case o.TLS:
		auth += ", TLS"
	}
	return auth
}

// StartKafka runs franz-go's kfake broker on addr (an IP:port it binds and
// advertises), auto-creating topics with partitions partitions.
func StartKafka(addr string, partitions int) (*kfake.Cluster, error) {
	host, port, err := SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("kafka-fake: --addr: %w", err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("kafka-fake: --addr host %q: want an IP address such as 127.0.0.1", host)
	}
	cluster, err := kfake.NewCluster(
		kfake.Ports(port),
		// kfake asks for 127.0.0.1:port; bind the configured host
		// instead, which it then advertises in metadata.
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(partitions),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka-fake: %w", err)
	}
	return cluster, nil
}

// SplitHostPort splits host:port; port -1 (a free port, NATS) is allowed.
func SplitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 { // -1: a free port (NATS)
		return "", 0, fmt.Errorf("bad port %q in %q", p, addr)
	}
	return host, port, nil
}

// HostPort strips a URL scheme ("nats://h:p" -> "h:p").
func HostPort(u string) string {
	for i := 0; i+2 < len(u); i++ {
		if u[i:i+3] == "://" {
			return u[i+3:]
		}
	}
	return u
}
