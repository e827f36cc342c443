// Package activities owns the side effects of koala's workflows: each
// activity does one thing (talk to workers over NATS, to Kafka's admin API,
// to ClickHouse), is safe to retry, and heartbeats while it waits.
package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/activity"
	"google.golang.org/grpc/credentials"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// Activities holds the clients every activity needs. Register a value of
// it with a Temporal worker; its exported methods are the activities.
type Activities struct {
	NC        *nats.Conn
	KafkaOpts []kgo.Opt
	// Metrics reads figures back; nil when no ClickHouse is configured.
	Metrics *metrics.ClickHouse
	// Events receives reconfiguration step rows.
	Events metrics.Recorder
	Logger *slog.Logger
	// RequestTimeout bounds one NATS request to a worker (default 30 s).
	RequestTimeout time.Duration
	// StateCreds secure connections to remote state servers (DropRemoteState);
	// nil means plaintext.
	StateCreds credentials.TransportCredentials
}

func (a *Activities) events() metrics.Recorder {
	if a.Events == nil {
		return metrics.Nop{}
	}
	return a.Events
}

func (a *Activities) timeout() time.Duration {
	if a.RequestTimeout <= 0 {
		return 30 * time.Second
	}
	return a.RequestTimeout
}

// request sends one control request to a worker and decodes its reply body into out (may be nil).
func (a *Activities) request(ctx context.Context, workerID, verb, jobID, reconfigID string, body, out any) error {
	return a.requestWithin(ctx, a.timeout(), workerID, verb, jobID, reconfigID, body, out)
}

// requestLong is request for a verb whose work grows with the state (a
// snapshot load copying gigabytes into a remote store): the worker may
// take as long as the activity has left, since a retry while it still
// works would only start the same work again.
func (a *Activities) requestLong(ctx context.Context, workerID, verb, jobID, reconfigID string, body, out any) error {
	d := a.timeout()
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > d {
		d = time.Until(dl)
	}
	return a.requestWithin(ctx, d, workerID, verb, jobID, reconfigID, body, out)
}

func (a *Activities) requestWithin(ctx context.Context, timeout time.Duration, workerID, verb, jobID, reconfigID string, body, out any) error {
	data, err := control.NewEnvelope(jobID, reconfigID, body)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Heartbeat while the worker has not answered, so that an unreachable
	// worker fails the activity with this request's error, which names the
	// worker, rather than with a bare heartbeat timeout.
	stopBeat := make(chan struct{})
	defer close(stopBeat)
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-tick.C:
				heartbeat(ctx, fmt.Sprintf("waiting for worker %s to answer %s", workerID, verb))
			}
		}
	}()
	msg, err := a.NC.RequestWithContext(rctx, control.WorkerSubject(workerID, verb), data)
	if err != nil {
		if err == nats.ErrNoResponders {
			return fmt.Errorf("worker %q does not answer %s (is `koala worker` running with this id and NATS at %s?): %w", workerID, verb, a.NC.ConnectedUrlRedacted(), err)
		}
		if ctx.Err() == nil && rctx.Err() != nil {
			return fmt.Errorf("%s on worker %q: no answer within %s (worker unreachable or stuck): %w", verb, workerID, timeout.Round(time.Second), err)
		}
		return fmt.Errorf("%s on worker %q: %w", verb, workerID, err)
	}
	var reply control.Reply
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		return fmt.Errorf("%s on worker %q: bad reply: %w", verb, workerID, err)
	}
	if reply.Error != "" {
		return fmt.Errorf("%s on worker %q: %s", verb, workerID, reply.Error)
	}
	if out != nil && len(reply.Body) > 0 {
		if err := json.Unmarshal(reply.Body, out); err != nil {
			return fmt.Errorf("%s on worker %q: decode reply: %w", verb, workerID, err)
		}
	}
	return nil
}

// tasksByWorker groups task ids of dep by worker, keeping worker order stable.
func tasksByWorker(dep control.Deployment, keep func(control.TaskRef) bool) ([]string, map[string][]string) {
	var order []string
	groups := map[string][]string{}
	for _, t := range dep.Tasks {
		if keep != nil && !keep(t) {
			continue
		}
		if _, ok := groups[t.WorkerID]; !ok {
			order = append(order, t.WorkerID)
		}
		groups[t.WorkerID] = append(groups[t.WorkerID], t.ID)
	}
	sort.Strings(order)
	return order, groups
}

// step records the start and end of one reconfiguration step as events.
func (a *Activities) step(ctx context.Context, rs StepInfo, fn func() error) error {
	if rs.ReconfigID == "" {
		return fn()
	}
	start := time.Now()
	a.events().RecordReconfig(metrics.ReconfigEvent{Time: start, Experiment: rs.Experiment, Job: rs.JobID, ReconfigID: rs.ReconfigID, Protocol: rs.Protocol, Step: rs.Step, Phase: "start"})
	err := fn()
	phase, detail := "end", ""
	if err != nil {
		phase, detail = "error", err.Error()
	}
	a.events().RecordReconfig(metrics.ReconfigEvent{Time: time.Now(), Experiment: rs.Experiment, Job: rs.JobID, ReconfigID: rs.ReconfigID, Protocol: rs.Protocol, Step: rs.Step, Phase: phase, Millis: float64(time.Since(start).Microseconds()) / 1e3, Detail: detail})
	return err
}

// StepInfo tags an activity call with the reconfiguration it belongs to.
type StepInfo struct {
	Experiment string `json:"experiment"`
	JobID      string `json:"job"`
	ReconfigID string `json:"reconfig_id"`
	Protocol   string `json:"protocol"`
	Step       string `json:"step"`
}

func heartbeat(ctx context.Context, details ...any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details...)
	}
}
