// Package dptest starts an in-process data plane for tests (inproc's
// cluster: an embedded NATS server, franz-go's kfake Kafka broker and a few
// workers, all on free loopback ports) and stops it when the test ends.
package dptest

import (
	"log/slog"
	"os"
	"testing"

	"koala/dataplane"
	"koala/dataplane/inproc"
	"koala/dataplane/metrics"
)

// Cluster is a running in-process data plane.
type Cluster struct{ *inproc.Cluster }

// StopWorker stops worker i (0-based) as if its process died: its tasks
// end, it sends no heartbeat and answers no request any more.
func (c *Cluster) StopWorker(t testing.TB, i int) {
	t.Helper()
	if err := c.Cluster.StopWorker(i); err != nil {
		t.Error(err)
	}
}

// Options shape the cluster.
type Options struct {
	Workers int // default 3
	// LogLevel of the workers' logs (default warn, to keep test output short).
	LogLevel slog.Level
	// Recorder receives every worker's metric rows (default: discarded).
	Recorder metrics.Recorder
	// Faults are injected into every worker's tasks (nil: none).
	Faults dataplane.Faults
}

// Start brings the cluster up and registers its shutdown with t.Cleanup;
// the workers' data directories are the test's temporary directories.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.LogLevel == 0 {
		opts.LogLevel = slog.LevelWarn
	}
	c, err := inproc.Start(inproc.Options{
		Workers:  opts.Workers,
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: opts.LogLevel})),
		Recorder: opts.Recorder,
		Faults:   opts.Faults,
		DataDir:  func(int) (string, error) { return t.TempDir(), nil },
	})
	if err != nil {
		t.Fatalf("in-process data plane: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return &Cluster{c}
}
