// Package dptest starts an in-process data plane for tests: an embedded
// NATS server, franz-go's kfake Kafka broker and a few workers, all on
// free loopback ports and all stopped when the test ends.
package dptest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kfake"

	"koala/dataplane"
	"koala/dataplane/metrics"
)

// Cluster is a running in-process data plane.
type Cluster struct {
	NATSURL string
	NC      *nats.Conn
	Brokers []string
	Workers []*dataplane.Worker
	// DataDirs are the workers' data directories (Pebble state lives
	// there), removed when the test ends.
	DataDirs []string
	stops    []func() // per worker: cancel its Run and wait for it
}

// StopWorker stops worker i (0-based) as if its process died: its tasks
// end, it sends no heartbeat and answers no request any more.
func (c *Cluster) StopWorker(t testing.TB, i int) {
	t.Helper()
	c.stops[i]()
}

// Options shape the cluster.
type Options struct {
	Workers int // default 3
	// LogLevel of the workers' logs (default warn, to keep test output short).
	LogLevel slog.Level
	// Recorder receives every worker's metric rows (default: discarded).
	Recorder metrics.Recorder
}

// Start brings the cluster up and registers its shutdown with t.Cleanup.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Workers <= 0 {
		opts.Workers = 3
	}
	if opts.LogLevel == 0 {
		opts.LogLevel = slog.LevelWarn
	}
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatalf("embedded NATS: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatalf("embedded NATS did not become ready")
	}
	t.Cleanup(ns.Shutdown)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(kc.Close)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatalf("connect NATS: %v", err)
	}
	t.Cleanup(nc.Close)
	c := &Cluster{NATSURL: ns.ClientURL(), NC: nc, Brokers: kc.ListenAddrs()}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: opts.LogLevel}))
	for i := 1; i <= opts.Workers; i++ {
		dir := t.TempDir()
		w, err := dataplane.NewWorker(dataplane.Options{
			ID: fmt.Sprintf("w%d", i), NATSURL: c.NATSURL, Listen: "127.0.0.1:0", DataDir: dir, Logger: log,
			Recorder: opts.Recorder,
		})
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		var once sync.Once
		stop := func() {
			once.Do(func() {
				cancel()
				select {
				case <-done:
				case <-time.After(15 * time.Second):
					t.Errorf("worker %s did not stop within 15s", w.ID())
				}
			})
		}
		t.Cleanup(stop)
		c.Workers = append(c.Workers, w)
		c.DataDirs = append(c.DataDirs, dir)
		c.stops = append(c.stops, stop)
	}
	return c
}
