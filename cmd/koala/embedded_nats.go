package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
)

// Embedded servers: the local stack runs these as plain processes so that
// NATS (always) and Kafka (in --kafka=embedded mode) need no install.

func init() {
	rootCmd.AddCommand(newNATSServerCmd(), newKafkaFakeCmd())
}

// natsServerConfig is what `koala nats-server` serves: where, with which
// credentials and which TLS.
type natsServerConfig struct {
	Addr            string // host:port; port -1 picks a free one (tests)
	User, Password  string
	Token           string
	TLSCert, TLSKey string
	TLSCA           string // set: clients must present a certificate it signed
	Debug           bool
}

// natsServerOptions turns c into nats-server options, naming the flag of
// any bad or incomplete setting.
func natsServerOptions(c natsServerConfig) (*natsserver.Options, error) {
	host, port, err := embeddedSplitHostPort(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("nats-server: --addr: %w", err)
	}
	opts := &natsserver.Options{
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
		return nil, errors.New("nats-server: --user and --password (" + envNATSUser + ", " + envNATSPassword + "): set both or neither")
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
		tc, err := natsserver.GenTLSConfig(&natsserver.TLSConfigOpts{
			CertFile: c.TLSCert, KeyFile: c.TLSKey, CaFile: c.TLSCA, Verify: c.TLSCA != "",
		})
		if err != nil {
			return nil, fmt.Errorf("nats-server: TLS from --tls-cert %s, --tls-key %s, --tls-ca %q: %w", c.TLSCert, c.TLSKey, c.TLSCA, err)
		}
		opts.TLS, opts.TLSConfig, opts.TLSVerify, opts.TLSTimeout = true, tc, c.TLSCA != "", 5
	}
	return opts, nil
}

// natsServerAuthSummary says how clients authenticate, without secrets.
func natsServerAuthSummary(o *natsserver.Options) string {
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

func newNATSServerCmd() *cobra.Command {
	var c natsServerConfig
	cmd := &cobra.Command{
		Use:   "nats-server",
		Short: "Run an embedded NATS server (no JetStream) until SIGTERM/SIGINT",
		Long: "Runs NATS in-process. It binds 127.0.0.1 unless --addr names a host. Clients must\n" +
			"authenticate when --user/--password or --token is set (env " + envNATSUser + ", " + envNATSPassword + ",\n" +
			envNATSToken + ": the same variables the controller and workers read); --tls-cert/--tls-key\n" +
			"serve TLS and --tls-ca also requires client certificates.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c.Password == "" {
				c.Password = os.Getenv(envNATSPassword)
			}
			if c.Token == "" {
				c.Token = os.Getenv(envNATSToken)
			}
			opts, err := natsServerOptions(c)
			if err != nil {
				return err
			}
			ns, err := natsserver.NewServer(opts)
			if err != nil {
				return fmt.Errorf("nats-server: %w", err)
			}
			ns.ConfigureLogger() // logs to stderr
			ns.Start()
			if !ns.ReadyForConnections(10 * time.Second) {
				ns.Shutdown()
				return fmt.Errorf("nats-server: not ready for connections on %s after 10s", c.Addr)
			}
			auth := natsServerAuthSummary(opts)
			if ip := net.ParseIP(opts.Host); (ip == nil || !ip.IsLoopback()) && opts.Username == "" && opts.Authorization == "" {
				fmt.Fprintf(os.Stderr, "nats-server: warning: listening on %s without authentication; set %s/%s or %s\n", c.Addr, envNATSUser, envNATSPassword, envNATSToken)
			}
			fmt.Fprintf(os.Stderr, "nats-server ready on nats://%s (%s)\n", ns.Addr(), auth)
			waitForStop("nats-server")
			ns.Shutdown()
			ns.WaitForShutdown()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.Addr, "addr", embeddedHostPort(envOr(envNATS, defNATS)), "host:port to listen on")
	f.BoolVar(&c.Debug, "debug", false, "log protocol debug messages")
	f.StringVar(&c.User, "user", envOr(envNATSUser, ""), "user clients must authenticate as (env "+envNATSUser+")")
	f.StringVar(&c.Password, "password", "", "password of --user (env "+envNATSPassword+", preferred: flags show in ps)")
	f.StringVar(&c.Token, "token", "", "token clients must present (env "+envNATSToken+", preferred: flags show in ps)")
	f.StringVar(&c.TLSCert, "tls-cert", envOr(envNATSServerTLSCert, ""), "PEM server certificate; turns TLS on (env "+envNATSServerTLSCert+")")
	f.StringVar(&c.TLSKey, "tls-key", envOr(envNATSServerTLSKey, ""), "key of --tls-cert (env "+envNATSServerTLSKey+")")
	f.StringVar(&c.TLSCA, "tls-ca", envOr(envNATSServerTLSCA, ""), "PEM CA bundle; clients must present a certificate it signed (env "+envNATSServerTLSCA+")")
	return cmd
}
