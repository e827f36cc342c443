package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/experiments/runner"
)

// Workers is what the view reads from the data plane.
type Workers interface {
	// Live lists the workers heard from lately, each with the tasks it
	// runs as "<job>/<task>".
	Live() []control.WorkerInfo
	// Status asks one worker for the status of job's tasks on it.
	Status(ctx context.Context, jobID, workerID string) (control.StatusReply, error)
}

// Metrics is what the view reads from ClickHouse (*metrics.ClickHouse).
type Metrics interface {
	JobsSince(ctx context.Context, since time.Time) ([]metrics.JobSeen, error)
	TaskRows(ctx context.Context, job string, from, to time.Time) ([]metrics.TaskRow, error)
	ReconfigEvents(ctx context.Context, job string) ([]metrics.ReconfigEvent, error)
}

var _ Metrics = (*metrics.ClickHouse)(nil)

// NATSWorkers follows the workers over NATS: their heartbeats (once a
// second, each with its tasks) and the answers to one ping at the start.
type NATSWorkers struct {
	nc    *nats.Conn
	stale time.Duration
	now   func() time.Time
	subs  []*nats.Subscription

	mu   sync.Mutex
	seen map[string]workerSeen
}

type workerSeen struct {
	info control.WorkerInfo
	at   time.Time
}

// NewNATSWorkers subscribes to the workers' heartbeats on nc and pings
// them once; a worker not heard from for stale (default 3 s) is left out.
// Close unsubscribes.
func NewNATSWorkers(nc *nats.Conn, stale time.Duration) (*NATSWorkers, error) {
	if stale <= 0 {
		stale = 3 * time.Second
	}
	w := &NATSWorkers{nc: nc, stale: stale, now: time.Now, seen: map[string]workerSeen{}}
	hb, err := nc.Subscribe(control.SubjectHeartbeatBase+".*", w.heard)
	if err != nil {
		return nil, fmt.Errorf("subscribe to worker heartbeats: %w", err)
	}
	inbox := nats.NewInbox()
	pong, err := nc.Subscribe(inbox, w.heard)
	if err != nil {
		_ = hb.Unsubscribe()
		return nil, fmt.Errorf("subscribe to ping replies: %w", err)
	}
	w.subs = []*nats.Subscription{hb, pong}
	if err := nc.PublishRequest(control.SubjectPing, inbox, nil); err != nil {
		w.Close()
		return nil, fmt.Errorf("ping workers: %w", err)
	}
	return w, nil
}

func (w *NATSWorkers) heard(msg *nats.Msg) {
	var info control.WorkerInfo
	if json.Unmarshal(msg.Data, &info) != nil || info.ID == "" {
		return
	}
	w.mu.Lock()
	w.seen[info.ID] = workerSeen{info: info, at: w.now()}
	w.mu.Unlock()
}

// Live implements Workers.
func (w *NATSWorkers) Live() []control.WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []control.WorkerInfo
	for _, s := range w.seen {
		if w.now().Sub(s.at) <= w.stale {
			out = append(out, s.info)
		}
	}
	slices.SortFunc(out, func(a, b control.WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Status implements Workers.
func (w *NATSWorkers) Status(ctx context.Context, jobID, workerID string) (control.StatusReply, error) {
	return runner.WorkerStatus(ctx, w.nc, jobID, workerID, nil)
}

// Close unsubscribes.
func (w *NATSWorkers) Close() {
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
}

// jobsOn groups the live workers' tasks by job: job -> worker ids
// (sorted) and the number of tasks.
func jobsOn(workers []control.WorkerInfo) map[string]*liveJob {
	out := map[string]*liveJob{}
	for _, w := range workers {
		for _, key := range w.Tasks {
			job, _, ok := strings.Cut(key, "/")
			if !ok {
				continue
			}
			j := out[job]
			if j == nil {
				j = &liveJob{}
				out[job] = j
			}
			j.tasks++
			if !slices.Contains(j.workers, w.ID) {
				j.workers = append(j.workers, w.ID)
			}
		}
	}
	return out
}

type liveJob struct {
	workers []string
	tasks   int
}
