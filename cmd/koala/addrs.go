package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// Environment variables naming service addresses. Flags default to them, and
// they default to the local stack, so the same binary runs against real clusters.
const (
	envTemporal   = "KOALA_TEMPORAL_ADDR" // host:port of the Temporal frontend
	envNamespace  = "KOALA_TEMPORAL_NAMESPACE"
	envTemporalUI = "KOALA_TEMPORAL_UI"    // base URL of the Temporal web UI, for links
	envNATS       = "KOALA_NATS_URL"       // nats://host:port
	envKafka      = "KOALA_KAFKA_BROKERS"  // comma-separated host:port list
	envClickHouse = "KOALA_CLICKHOUSE_URL" // http://host:port of the HTTP interface ("" or "none" disables metrics)
	envWorkerID   = "KOALA_WORKER_ID"
	envListen     = "KOALA_LISTEN" // worker data-plane listen address
	envDataDir    = "KOALA_DATA_DIR"
	envHome       = control.EnvHome // install cache and run directory of the local stack

	// NATS client credentials and TLS (controller, workers); the embedded
	// `koala nats-server` requires the same user/password or token.
	envNATSUser     = "KOALA_NATS_USER"
	envNATSPassword = "KOALA_NATS_PASSWORD"
	envNATSToken    = "KOALA_NATS_TOKEN"
	envNATSCreds    = "KOALA_NATS_CREDS"    // NATS .creds file (JWT + nkey seed)
	envNATSTLSCA    = "KOALA_NATS_TLS_CA"   // PEM bundle verifying the server
	envNATSTLSCert  = "KOALA_NATS_TLS_CERT" // client certificate, for servers that verify clients
	envNATSTLSKey   = "KOALA_NATS_TLS_KEY"
	// TLS of `koala nats-server` itself.
	envNATSServerTLSCert = "KOALA_NATS_SERVER_TLS_CERT"
	envNATSServerTLSKey  = "KOALA_NATS_SERVER_TLS_KEY"
	envNATSServerTLSCA   = "KOALA_NATS_SERVER_TLS_CA" // set: clients must present a certificate it signed

	// TLS of the data-plane gRPC services (record exchange, state fetch,
	// statesvc): this process's certificate, the CA verifying peers, and
	// whether servers require client certificates.
	envGRPCTLSCert       = "KOALA_GRPC_TLS_CERT"
	envGRPCTLSKey        = "KOALA_GRPC_TLS_KEY"
	envGRPCTLSCA         = "KOALA_GRPC_TLS_CA"
	envGRPCTLSMutual     = "KOALA_GRPC_TLS_MUTUAL" // "1"/"true"
	envGRPCTLSServerName = "KOALA_GRPC_TLS_SERVER_NAME"

	defTemporal   = "127.0.0.1:7233"
	defNamespace  = "default"
	defTemporalUI = "http://127.0.0.1:8233"
	defNATS       = "nats://127.0.0.1:4222"
	defKafka      = "127.0.0.1:9092"
	defClickHouse = "http://127.0.0.1:8123"
	defListen     = "127.0.0.1:0"
)

// The ClickHouse native TCP interface (host:port), over which the metrics
// tables are created and read; rows are inserted over the HTTP interface
// (envClickHouse).
const (
	envClickHouseNative = "KOALA_CLICKHOUSE_NATIVE"
	defClickHouseNative = "127.0.0.1:9000"
)

// clickHouseNativeFlag registers --clickhouse-native, which goes with a
// command's --clickhouse.
func clickHouseNativeFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "clickhouse-native", envOr(envClickHouseNative, defClickHouseNative),
		"ClickHouse native TCP host:port the metrics tables are created and read over (env "+envClickHouseNative+")")
}

// newClickHouse returns the metrics client of database koala, inserting over
// httpURL and reading over native, after checking native so that a bad
// flag or environment value is reported before anything runs.
func newClickHouse(httpURL, native string, opts ...metrics.Option) (*metrics.ClickHouse, error) {
	if err := metrics.CheckNativeAddr(native); err != nil {
		return nil, fmt.Errorf("--clickhouse-native (env %s): %w", envClickHouseNative, err)
	}
	return metrics.NewClickHouse(httpURL, native, "koala", opts...), nil
}
