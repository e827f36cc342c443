package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
)

// Worker liveness. Every worker publishes a heartbeat on
// control.HeartbeatSubject(id) once a second (the worker runtime's Run).
// WatchWorkers runs for the whole experiment and fails with a non-retryable
// WorkerLost error as soon as one watched worker has been silent for longer
// than the allowed silence; the experiment workflow then cancels what is in
// flight and stops the job with StopJob.

// ErrTypeWorkerLost is the ApplicationError type of a lost worker.
const ErrTypeWorkerLost = "WorkerLost"

// DefaultWorkerSilence is how long a worker may stay silent before it
// counts as lost, when WatchInput does not say.
const DefaultWorkerSilence = 10 * time.Second

// WatchInput names the workers an experiment depends on.
type WatchInput struct {
	JobID   string   `json:"job"`
	Workers []string `json:"workers"`
	// SilenceSecs is how long a worker may send no heartbeat before it is
	// lost (0: DefaultWorkerSilence).
	SilenceSecs float64 `json:"silence_secs,omitempty"`
}

// WorkerLost is the detail of a WorkerLost error.
type WorkerLost struct {
	WorkerID   string  `json:"worker"`
	SilentSecs float64 `json:"silent_secs"`
}

func (in WatchInput) silence() time.Duration {
	if in.SilenceSecs <= 0 {
		return DefaultWorkerSilence
	}
	return time.Duration(in.SilenceSecs * float64(time.Second))
}

// WatchWorkers listens to the heartbeats of the named workers until ctx is
// cancelled (the experiment ended: it returns the context's error) or one
// of them has been silent for the allowed silence: then it returns a
// non-retryable WorkerLost error, "worker w2 lost: no heartbeat for 10s".
//
// Every worker starts with a full allowance when the watch starts, so a
// retried attempt (the controller restarted) does not count the time
// nobody watched. Silence while the controller itself is cut off from NATS
// is no evidence against a worker: after a reconnect every worker gets a
// full allowance again.
func (a *Activities) WatchWorkers(ctx context.Context, in WatchInput) error {
	if len(in.Workers) == 0 {
		return temporal.NewNonRetryableApplicationError("watch workers: no worker to watch", "BadConfig", nil)
	}
	silence := in.silence()
	workers := slices.Clone(in.Workers)
	slices.Sort(workers)
	bySubject := map[string]string{}
	last := map[string]time.Time{}
	ch := make(chan *nats.Msg, 64*len(workers))
	for _, w := range workers {
		subj := control.HeartbeatSubject(w)
		bySubject[subj] = w
		sub, err := a.NC.ChanSubscribe(subj, ch)
		if err != nil {
			return fmt.Errorf("watch workers: subscribe %s: %w", subj, err)
		}
		defer sub.Unsubscribe()
	}
	if err := a.NC.Flush(); err != nil {
		return fmt.Errorf("watch workers: NATS flush: %w", err)
	}
	reset := func(now time.Time) {
		for _, w := range workers {
			last[w] = now
		}
	}
	reset(time.Now())
	tick := time.NewTicker(min(silence/10, time.Second))
	defer tick.Stop()
	cutOff := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-ch:
			if w, ok := bySubject[m.Subject]; ok {
				last[w] = time.Now()
			}
		case now := <-tick.C:
			heartbeat(ctx, fmt.Sprintf("watching %s", strings.Join(workers, ", ")))
			if !a.NC.IsConnected() {
				cutOff = true
				continue
			}
			if cutOff {
				cutOff = false
				reset(now)
				continue
			}
			if w, d := longestSilent(workers, last, now); d >= silence {
				msg := fmt.Sprintf("worker %s lost: no heartbeat for %s", w, d.Round(time.Second))
				a.logger().Error("worker lost", "job", in.JobID, "worker", w, "silent", d.Round(time.Millisecond))
				return temporal.NewNonRetryableApplicationError(msg, ErrTypeWorkerLost, nil, WorkerLost{WorkerID: w, SilentSecs: d.Seconds()})
			}
		}
	}
}

// longestSilent returns the worker silent for longest (ties: the first in
// order) and for how long.
func longestSilent(workers []string, last map[string]time.Time, now time.Time) (string, time.Duration) {
	var who string
	var most time.Duration = -1
	for _, w := range workers {
		if d := now.Sub(last[w]); d > most {
			who, most = w, d
		}
	}
	return who, most
}

// StopJobInput names a job and the workers that may host its tasks.
type StopJobInput struct {
	JobID   string   `json:"job"`
	Workers []string `json:"workers"`
	// Lost workers are not asked (they are gone).
	Lost []string `json:"lost,omitempty"`
}

// StopJob stops every task of the job on every named worker, whatever
// deployment they belong to (a reconfiguration cut short may have created
// tasks the last known deployment does not list), then checks with a ping
// round that no worker still hosts one, and repeats while one does (a step
// cancelled mid-flight may still deploy a task after the first stop).
func (a *Activities) StopJob(ctx context.Context, in StopJobInput) error {
	var live []string
	for _, w := range in.Workers {
		if !slices.Contains(in.Lost, w) {
			live = append(live, w)
		}
	}
	var errs []error
	for round := 1; ; round++ {
		errs = errs[:0]
		for _, w := range live {
			if err := a.request(ctx, w, control.VerbStop, in.JobID, "", control.TasksRequest{}, nil); err != nil {
				errs = append(errs, err)
			}
		}
		heartbeat(ctx, round)
		infos, err := a.ping(ctx, 300*time.Millisecond)
		if err != nil {
			return fmt.Errorf("stop job %s: %w", in.JobID, err)
		}
		left := jobTasksLeft(infos, in.JobID, live)
		if len(left) == 0 {
			return errors.Join(errs...)
		}
		if round == 5 {
			return fmt.Errorf("stop job %s: tasks still running after %d rounds: %v", in.JobID, round, left)
		}
		a.logger().Warn("stop job: tasks left, stopping again", "job", in.JobID, "tasks", left)
	}
}

// jobTasksLeft lists "worker: job/task" for every task of job that one of
// the workers still reports.
func jobTasksLeft(infos []control.WorkerInfo, jobID string, workers []string) []string {
	var left []string
	for _, info := range infos {
		if !slices.Contains(workers, info.ID) {
			continue
		}
		for _, k := range info.Tasks {
			if strings.HasPrefix(k, jobID+"/") {
				left = append(left, info.ID+": "+k)
			}
		}
	}
	return left
}

func (a *Activities) logger() *slog.Logger {
	if a.Logger == nil {
		return slog.Default()
	}
	return a.Logger
}
