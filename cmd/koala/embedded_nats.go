package main

import (
	"fmt"
	"net"
	"os"
	"time"

	"koala/deploy/embedded"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"
)

// Embedded servers: the local stack runs these as plain processes so that
// NATS (always) and Kafka (in --kafka=embedded mode) need no install.

func init() {
	rootCmd.AddCommand(newNATSServerCmd(), newKafkaFakeCmd())
}

func newNATSServerCmd() *cobra.Command {
	var c embedded.NATSConfig
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
			opts, err := embedded.NATSOptions(c)
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
			auth := embedded.NATSAuthSummary(opts)
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
	f.StringVar(&c.Addr, "addr", embedded.HostPort(envOr(envNATS, defNATS)), "host:port to listen on")
	f.BoolVar(&c.Debug, "debug", false, "log protocol debug messages")
	f.StringVar(&c.User, "user", envOr(envNATSUser, ""), "user clients must authenticate as (env "+envNATSUser+")")
	f.StringVar(&c.Password, "password", "", "password of --user (env "+envNATSPassword+", preferred: flags show in ps)")
	f.StringVar(&c.Token, "token", "", "token clients must present (env "+envNATSToken+", preferred: flags show in ps)")
	f.StringVar(&c.TLSCert, "tls-cert", envOr(envNATSServerTLSCert, ""), "PEM server certificate; turns TLS on (env "+envNATSServerTLSCert+")")
	f.StringVar(&c.TLSKey, "tls-key", envOr(envNATSServerTLSKey, ""), "key of --tls-cert (env "+envNATSServerTLSKey+")")
	f.StringVar(&c.TLSCA, "tls-ca", envOr(envNATSServerTLSCA, ""), "PEM CA bundle; clients must present a certificate it signed (env "+envNATSServerTLSCA+")")
	return cmd
}
