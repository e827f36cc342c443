package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
	"koala/queries"
)

// DiscoverInput says which workers a job needs.
type DiscoverInput struct {
	Want    []string `json:"want,omitempty"` // required worker ids; empty = any
	Min     int      `json:"min"`
	Timeout float64  `json:"timeout_secs"`
}

// DiscoverWorkers asks every worker to identify itself and waits until
// the wanted ones (or at least Min) answered.
func (a *Activities) DiscoverWorkers(ctx context.Context, in DiscoverInput) ([]control.WorkerInfo, error) {
	timeout := time.Duration(in.Timeout * float64(time.Second))
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		found, err := a.ping(ctx, 500*time.Millisecond)
		if err != nil {
			return nil, err
		}
		got, missing := selectWorkers(found, in)
		if len(missing) == 0 && len(got) >= max(in.Min, 1) {
			return got, nil
		}
		if time.Now().After(deadline) {
			var ids []string
			for _, w := range found {
				ids = append(ids, w.ID)
			}
			return nil, fmt.Errorf("workers: %d answered (%s), need at least %d; missing %v — start them with `koala worker` against NATS %s",
				len(found), strings.Join(ids, ", "), max(in.Min, 1), missing, a.NC.ConnectedUrlRedacted())
		}
		heartbeat(ctx, len(found))
	}
}

func selectWorkers(found []control.WorkerInfo, in DiscoverInput) ([]control.WorkerInfo, []string) {
	if len(in.Want) == 0 {
		return found, nil
	}
	byID := map[string]control.WorkerInfo{}
	for _, w := range found {
		byID[w.ID] = w
	}
	var got []control.WorkerInfo
	var missing []string
	for _, id := range in.Want {
		if w, ok := byID[id]; ok {
			got = append(got, w)
		} else {
			missing = append(missing, id)
		}
	}
	return got, missing
}

// ping collects ping replies for window.
func (a *Activities) ping(ctx context.Context, window time.Duration) ([]control.WorkerInfo, error) {
	inbox := nats.NewInbox()
	sub, err := a.NC.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("discover workers: %w", err)
	}
	defer sub.Unsubscribe()
	if err := a.NC.PublishRequest(control.SubjectPing, inbox, nil); err != nil {
		return nil, fmt.Errorf("discover workers: %w", err)
	}
	end := time.Now().Add(window)
	seen := map[string]control.WorkerInfo{}
	for {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		msg, err := sub.NextMsg(left)
		if err != nil {
			break // window over
		}
		var info control.WorkerInfo
		if json.Unmarshal(msg.Data, &info) == nil && info.ID != "" {
			seen[info.ID] = info
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	out := make([]control.WorkerInfo, 0, len(seen))
	for _, w := range seen {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// JobInput describes the job to build from a query.
type JobInput struct {
	JobID        string            `json:"job_id"`
	Experiment   string            `json:"experiment"`
	Query        string            `json:"query"`
	Parallelism  map[string]int    `json:"parallelism"`
	NumBuckets   int               `json:"num_buckets"`
	BatchSize    int               `json:"batch_size"`
	Partitions   int               `json:"partitions"`
	KafkaBrokers []string          `json:"kafka_brokers"`
	StateBackend string            `json:"state_backend"`
	Params       map[string]string `json:"params"`
	// Checkpoints: the job takes checkpoints; without a CheckpointStore
	// parameter it gets DefaultCheckpointStore.
	Checkpoints bool `json:"checkpoints,omitempty"`
}

// BuildJob resolves the query into a job spec. An unknown query or
// operator is not retryable.
func (a *Activities) BuildJob(ctx context.Context, in JobInput) (control.JobSpec, error) {
	ops, err := queries.OperatorsFor(in.Query, in.Parallelism, in.Params)
	if err != nil {
		return control.JobSpec{}, temporal.NewNonRetryableApplicationError(err.Error(), "BadQuery", err)
	}
	if len(in.KafkaBrokers) == 0 {
		return control.JobSpec{}, temporal.NewNonRetryableApplicationError("KafkaBrokers is empty: name at least one broker", "BadConfig", nil)
	}
	job := control.JobSpec{
		JobID: in.JobID, Experiment: in.Experiment, Query: in.Query, Operators: ops,
		NumBuckets: in.NumBuckets, BatchSize: in.BatchSize, Partitions: in.Partitions,
		Topic: "koala-" + in.JobID, KafkaBrokers: in.KafkaBrokers, StateBackend: in.StateBackend, Params: in.Params,
		ExactnessUnchecked: queries.Unchecked(in.Query),
		OrderUnchecked:     queries.Unordered(in.Query),
	}
	if job.NumBuckets <= 0 {
		job.NumBuckets = control.DefaultNumBuckets
	}
	if job.BatchSize <= 0 {
		job.BatchSize = 1000
	}
	if job.Partitions <= 0 {
		job.Partitions = 4
	}
	if in.Checkpoints {
		if err := withCheckpointStore(&job); err != nil {
			return job, badConfig(err)
		}
	}
	return job, nil
}

// CreateTopic creates the job's input topic; an existing topic is fine.
func (a *Activities) CreateTopic(ctx context.Context, job control.JobSpec) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(job.KafkaBrokers...)}, a.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("kafka client for %v: %w", job.KafkaBrokers, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, int32(job.Partitions), 1, nil, job.Topic)
	if err != nil {
		return fmt.Errorf("create topic %s on %v: %w", job.Topic, job.KafkaBrokers, err)
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", job.Topic, resp.Err)
	}
	return nil
}

// TasksInput names tasks of a deployment; empty TaskIDs means all.
type TasksInput struct {
	Deployment control.Deployment `json:"deployment"`
	TaskIDs    []string           `json:"task_ids,omitempty"`
	Step       StepInfo           `json:"step"`
	// StartOffsets position the source partitions of deployed tasks
	// (DeployTasks only; default: start of topic). Recovery rewinds to a
	// checkpoint's offsets with it.
	StartOffsets map[int32]int64 `json:"start_offsets,omitempty"`
	// OpenGates (UpdateRouting with TaskIDs only): see
	// control.RoutingRequest.OpenGates.
	OpenGates bool `json:"open_gates,omitempty"`
}

func (in TasksInput) filter() func(control.TaskRef) bool {
	if len(in.TaskIDs) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, id := range in.TaskIDs {
		want[id] = true
	}
	return func(t control.TaskRef) bool { return want[t.ID] }
}

// DeployTasks creates tasks on their workers (not started). Every worker of
// the deployment also learns the new deployment, so existing tasks route to
// the new ones once they are started.
func (a *Activities) DeployTasks(ctx context.Context, in TasksInput) error {
	return a.step(ctx, in.Step, func() error {
		order, groups := tasksByWorker(in.Deployment, in.filter())
		for _, wid := range order {
			req := control.DeployRequest{Deployment: in.Deployment, TaskIDs: groups[wid], StartOffsets: in.StartOffsets}
			if err := a.request(ctx, wid, control.VerbDeploy, in.Deployment.Job.JobID, in.Step.ReconfigID, req, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// StartTasks starts created tasks; sinks first so nothing sends to a task
// that is not yet draining its inbox.
func (a *Activities) StartTasks(ctx context.Context, in TasksInput) error {
	return a.step(ctx, in.Step, func() error {
		ops := in.Deployment.Job.Operators
		for i := len(ops) - 1; i >= 0; i-- {
			op := ops[i].Name
			keep := in.filter()
			order, groups := tasksByWorker(in.Deployment, func(t control.TaskRef) bool {
				return t.Operator == op && (keep == nil || keep(t))
			})
			for _, wid := range order {
				if err := a.request(ctx, wid, control.VerbStart, in.Deployment.Job.JobID, in.Step.ReconfigID, control.TasksRequest{TaskIDs: groups[wid]}, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// StopTasks stops and removes tasks (all of the job when TaskIDs is empty).
func (a *Activities) StopTasks(ctx context.Context, in TasksInput) error {
	return a.step(ctx, in.Step, func() error {
		order, groups := tasksByWorker(in.Deployment, in.filter())
		for _, wid := range order {
			if err := a.request(ctx, wid, control.VerbStop, in.Deployment.Job.JobID, in.Step.ReconfigID, control.TasksRequest{TaskIDs: groups[wid]}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpdateRouting installs the deployment's routing on the named tasks, or on
// every task of it when TaskIDs is empty.
func (a *Activities) UpdateRouting(ctx context.Context, in TasksInput) error {
	return a.step(ctx, in.Step, func() error {
		if len(in.TaskIDs) > 0 {
			return a.onWorkersOf(ctx, in.Deployment, in.TaskIDs, control.VerbRouting, in.Step.ReconfigID, func(ids []string) any {
				return control.RoutingRequest{Deployment: in.Deployment, TaskIDs: ids, OpenGates: in.OpenGates}
			})
		}
		for _, wid := range in.Deployment.Workers() {
			req := control.RoutingRequest{Deployment: in.Deployment}
			if err := a.request(ctx, wid, control.VerbRouting, in.Deployment.Job.JobID, in.Step.ReconfigID, req, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// ResumeSources lets paused sources read again.
func (a *Activities) ResumeSources(ctx context.Context, in TasksInput) error {
	return a.step(ctx, in.Step, func() error {
		order, groups := tasksByWorker(in.Deployment, isSource(in.Deployment))
		for _, wid := range order {
			if err := a.request(ctx, wid, control.VerbResume, in.Deployment.Job.JobID, in.Step.ReconfigID, control.TasksRequest{TaskIDs: groups[wid]}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

func isSource(dep control.Deployment) func(control.TaskRef) bool {
	return func(t control.TaskRef) bool {
		op, _ := dep.Job.Operator(t.Operator)
		return len(op.Inputs) == 0
	}
}

func isSink(dep control.Deployment) func(control.TaskRef) bool {
	return func(t control.TaskRef) bool { return len(dep.Job.Downstreams(t.Operator)) == 0 }
}
