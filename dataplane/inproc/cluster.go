// Package inproc runs a whole data plane inside one process: an embedded
// NATS server, franz-go's kfake Kafka broker and a few workers, all on free
// loopback ports. The bench's state phase measures with it and dptest
// wraps it for tests; a real deployment runs `koala worker` processes
// against real services instead.
package inproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kfake"

	"koala/dataplane"
	"koala/dataplane/metrics"
)

// workerStopWait bounds how long Close and StopWorker wait for a worker.
const workerStopWait = 15 * time.Second

// Options shape the cluster.
type Options struct {
	Workers int          // default 3
	Logger  *slog.Logger // the workers' log (default: warnings to stderr)
	// Recorder receives every worker's metric rows (default: discarded).
	Recorder metrics.Recorder
	// DataDir returns worker i's data directory (Pebble state lives there);
	// default: a new temporary directory, removed by Close.
	DataDir func(i int) (string, error)
	// Faults are injected into every worker's tasks (nil: none).
	Faults dataplane.Faults
}

// Cluster is a running in-process data plane.
type Cluster struct {
	NATSURL string
	NC      *nats.Conn
	Brokers []string
	Workers []*dataplane.Worker
	// DataDirs are the workers' data directories.
	DataDirs []string

	ns      *server.Server
	kafka   *kfake.Cluster
	stops   []func() error // per worker: cancel its Run and wait for it
	tempDir []string       // data directories Close removes
}

// Kafka is the cluster's kfake broker, for tests that cut it off
// (kfake's ControlKey) to play an outage.
func (c *Cluster) Kafka() *kfake.Cluster { return c.kafka }

// Start brings up NATS, one kfake broker and the workers. On error whatever
// was started is stopped again.
func Start(opts Options) (c *Cluster, err error) {
	if opts.Workers <= 0 {
		opts.Workers = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	c = &Cluster{}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	c.ns, err = server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		return c, fmt.Errorf("embedded NATS: %w", err)
	}
	go c.ns.Start()
	if !c.ns.ReadyForConnections(10 * time.Second) {
		return c, errors.New("embedded NATS not ready for connections within 10 s")
	}
	c.NATSURL = c.ns.ClientURL()
	if c.kafka, err = kfake.NewCluster(kfake.NumBrokers(1)); err != nil {
		return c, fmt.Errorf("kfake broker: %w", err)
	}
	c.Brokers = c.kafka.ListenAddrs()
	if c.NC, err = nats.Connect(c.NATSURL); err != nil {
		return c, fmt.Errorf("connect to the embedded NATS at %s: %w", c.NATSURL, err)
	}
	for i := 0; i < opts.Workers; i++ {
		if err := c.startWorker(i, opts); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *Cluster) startWorker(i int, opts Options) error {
	id := fmt.Sprintf("w%d", i+1)
	var dir string
	var err error
	if opts.DataDir != nil {
		dir, err = opts.DataDir(i)
	} else if dir, err = os.MkdirTemp("", "koala-inproc-"+id+"-"); err == nil {
		c.tempDir = append(c.tempDir, dir)
	}
	if err != nil {
		return fmt.Errorf("data directory of worker %s: %w", id, err)
	}
	c.DataDirs = append(c.DataDirs, dir)
	w, err := dataplane.NewWorker(dataplane.Options{ID: id, NATSURL: c.NATSURL, Listen: "127.0.0.1:0", DataDir: dir, Logger: opts.Logger, Recorder: opts.Recorder, Faults: opts.Faults})
	if err != nil {
		return fmt.Errorf("worker %s: %w", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var stopErr error
	c.stops = append(c.stops, func() error {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(workerStopWait):
				stopErr = fmt.Errorf("worker %s did not stop within %v", id, workerStopWait)
			}
		})
		return stopErr
	})
	c.Workers = append(c.Workers, w)
	return nil
}

// StopWorker stops worker i (0-based) as if its process died: its tasks
// end, it sends no heartbeat and answers no request any more.
func (c *Cluster) StopWorker(i int) error { return c.stops[i]() }

// Close stops the workers, the NATS connection, the broker and the server,
// and removes the data directories it created. It returns the workers that
// did not stop in time.
func (c *Cluster) Close() error {
	var errs []error
	for _, stop := range c.stops {
		if err := stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.NC != nil {
		c.NC.Close()
	}
	if c.kafka != nil {
		c.kafka.Close()
	}
	if c.ns != nil {
		c.ns.Shutdown()
	}
	for _, d := range c.tempDir {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
