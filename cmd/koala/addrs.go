package main

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
	envHome       = "KOALA_HOME" // install cache and run directory of the local stack

	defTemporal   = "127.0.0.1:7233"
	defNamespace  = "default"
	defTemporalUI = "http://127.0.0.1:8233"
	defNATS       = "nats://127.0.0.1:4222"
	defKafka      = "127.0.0.1:9092"
	defClickHouse = "http://127.0.0.1:8123"
	defListen     = "127.0.0.1:0"
)
