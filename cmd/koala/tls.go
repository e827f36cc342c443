package main

import (
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"koala/dataplane/transport"
)

// Flags of NATS credentials and of TLS, shared by the subcommands that
// connect (controller, worker) or serve (worker, statesvc). Secrets have no
// default from the environment in the flag itself, so `--help` never prints
// them; resolve fills them from the environment after parsing.

func addNATSSecurityFlags(f *pflag.FlagSet, s *transport.NATSSecurity) {
	f.StringVar(&s.User, "nats-user", envOr(envNATSUser, ""), "NATS user (env "+envNATSUser+")")
	f.StringVar(&s.Password, "nats-password", "", "NATS password (env "+envNATSPassword+", preferred: flags show in ps)")
	f.StringVar(&s.Token, "nats-token", "", "NATS token (env "+envNATSToken+", preferred: flags show in ps)")
	f.StringVar(&s.CredsFile, "nats-creds", envOr(envNATSCreds, ""), "NATS credentials file (JWT and nkey seed) (env "+envNATSCreds+")")
	f.StringVar(&s.TLSCA, "nats-tls-ca", envOr(envNATSTLSCA, ""), "PEM CA bundle verifying the NATS server; turns TLS on (env "+envNATSTLSCA+")")
	f.StringVar(&s.TLSCert, "nats-tls-cert", envOr(envNATSTLSCert, ""), "client certificate for NATS servers that verify clients (env "+envNATSTLSCert+")")
	f.StringVar(&s.TLSKey, "nats-tls-key", envOr(envNATSTLSKey, ""), "key of --nats-tls-cert (env "+envNATSTLSKey+")")
}

// resolveNATSSecrets fills the password and token from the environment
// unless given as flags.
func resolveNATSSecrets(s *transport.NATSSecurity) {
	if s.Password == "" {
		s.Password = os.Getenv(envNATSPassword)
	}
	if s.Token == "" {
		s.Token = os.Getenv(envNATSToken)
	}
}

func addGRPCTLSFlags(f *pflag.FlagSet, g *transport.GRPCTLS) {
	mutual, _ := strconv.ParseBool(os.Getenv(envGRPCTLSMutual))
	f.StringVar(&g.Cert, "grpc-tls-cert", envOr(envGRPCTLSCert, ""), "PEM certificate this process serves gRPC with (and presents with --grpc-tls-mutual) (env "+envGRPCTLSCert+")")
	f.StringVar(&g.Key, "grpc-tls-key", envOr(envGRPCTLSKey, ""), "key of --grpc-tls-cert (env "+envGRPCTLSKey+")")
	f.StringVar(&g.CA, "grpc-tls-ca", envOr(envGRPCTLSCA, ""), "PEM CA bundle verifying gRPC peers (env "+envGRPCTLSCA+")")
	f.BoolVar(&g.Mutual, "grpc-tls-mutual", mutual, "servers require client certificates signed by --grpc-tls-ca (env "+envGRPCTLSMutual+")")
	f.StringVar(&g.ServerName, "grpc-tls-server-name", envOr(envGRPCTLSServerName, ""), "name verified in server certificates instead of the dialled host (env "+envGRPCTLSServerName+")")
}

// natsSecurityFromEnv is the client side of the KOALA_NATS_* variables, for
// the stack's own checks of the NATS server it starts.
func natsSecurityFromEnv() transport.NATSSecurity {
	return transport.NATSSecurity{
		User: os.Getenv(envNATSUser), Password: os.Getenv(envNATSPassword), Token: os.Getenv(envNATSToken),
		CredsFile: os.Getenv(envNATSCreds),
		TLSCA:     os.Getenv(envNATSTLSCA), TLSCert: os.Getenv(envNATSTLSCert), TLSKey: os.Getenv(envNATSTLSKey),
	}
}
