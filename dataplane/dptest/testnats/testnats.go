// Package testnats starts an embedded NATS server for tests that sit below
// the runtime (dptest starts a whole data plane and imports it).
package testnats

import (
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// Start runs a NATS server with opts on a free 127.0.0.1 port and stops it
// when the test ends.
func Start(t testing.TB, opts *natsserver.Options) *natsserver.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	return ns
}
