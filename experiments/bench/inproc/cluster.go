package inproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kfake"

	"koala/dataplane"
)

// Cluster is a running in-process data plane; Close stops it and removes
// its data directories.
type Cluster struct {
	NC      *nats.Conn
	Brokers []string
	// DataDirs are the workers' data directories, where their Pebble state
	// lives.
	DataDirs []string

	ns      *server.Server
	kafka   *kfake.Cluster
	workers []runningWorker
}

type runningWorker struct {
	id     string
	cancel context.CancelFunc
	done   chan error
}

// Start brings up NATS, one kfake broker and n workers whose logs go to log.
// On error whatever was started is stopped again.
func Start(n int, log *slog.Logger) (c *Cluster, err error) {
	c = &Cluster{}
	defer func() {
		if err != nil {
			c.Close()
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
	if c.kafka, err = kfake.NewCluster(kfake.NumBrokers(1)); err != nil {
		return c, fmt.Errorf("kfake broker: %w", err)
	}
	c.Brokers = c.kafka.ListenAddrs()
	if c.NC, err = nats.Connect(c.ns.ClientURL()); err != nil {
		return c, fmt.Errorf("connect to the embedded NATS at %s: %w", c.ns.ClientURL(), err)
	}
	for i := 1; i <= n; i++ {
		if err := c.startWorker(fmt.Sprintf("w%d", i), log); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *Cluster) startWorker(id string, log *slog.Logger) error {
	dir, err := os.MkdirTemp("", "koala-bench-state-"+id+"-")
	if err != nil {
		return fmt.Errorf("data directory of worker %s: %w", id, err)
	}
	c.DataDirs = append(c.DataDirs, dir)
	w, err := dataplane.NewWorker(dataplane.Options{ID: id, NATSURL: c.ns.ClientURL(), Listen: "127.0.0.1:0", DataDir: dir, Logger: log})
	if err != nil {
		return fmt.Errorf("worker %s: %w", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := runningWorker{id: id, cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(ctx) }()
	c.workers = append(c.workers, rw)
	return nil
}

// Close stops the workers (waiting up to 15 s for each), the NATS
// connection, the broker and the server, and removes the data directories.
// It returns the workers that did not stop in time.
func (c *Cluster) Close() error {
	var errs []error
	for _, w := range c.workers {
		w.cancel()
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			errs = append(errs, fmt.Errorf("worker %s did not stop within 15 s", w.id))
		}
	}
	c.workers = nil
	if c.NC != nil {
		c.NC.Close()
	}
	if c.kafka != nil {
		c.kafka.Close()
	}
	if c.ns != nil {
		c.ns.Shutdown()
	}
	for _, d := range c.DataDirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
