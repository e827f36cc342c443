package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// ProducerInput starts or stops the input generator of a job on a worker.
type ProducerInput struct {
	JobID    string                 `json:"job_id"`
	WorkerID string                 `json:"worker_id"`
	Request  control.ProduceRequest `json:"request"`
}

// StartProducer starts the generator; a retried start is a no-op.
func (a *Activities) StartProducer(ctx context.Context, in ProducerInput) error {
	return a.request(ctx, in.WorkerID, control.VerbProduceStart, in.JobID, "", in.Request, nil)
}

// StopProducer stops the generator and returns what Kafka acknowledged.
func (a *Activities) StopProducer(ctx context.Context, in ProducerInput) (control.ProduceReport, error) {
	var rep control.ProduceReport
	err := a.request(ctx, in.WorkerID, control.VerbProduceStop, in.JobID, "", control.ProduceStopRequest{Producer: in.Request.Producer}, &rep)
	return rep, err
}

// EndOffsets returns the end offset of every partition of the job's topic.
func (a *Activities) EndOffsets(ctx context.Context, job control.JobSpec) (map[int32]int64, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(job.KafkaBrokers...)}, a.KafkaOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %v: %w", job.KafkaBrokers, err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, job.Topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", job.Topic, err)
	}
	out := map[int32]int64{}
	var ferr error
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && ferr == nil {
			ferr = fmt.Errorf("end offset of %s[%d]: %w", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out, ferr
}

// SinkCounts is the exactness ledger summed over the sink tasks.
type SinkCounts struct {
	Received   uint64 `json:"received"`
	Distinct   uint64 `json:"distinct"`
	Duplicates uint64 `json:"duplicates"`
	// Reordered counts records that reached a sink after a later record of
	// their key (same source partition); OrderChecked says every sink
	// checked order.
	Reordered    uint64 `json:"reordered,omitempty"`
	OrderChecked bool   `json:"order_checked,omitempty"`
	Tasks        int    `json:"tasks"`
	// Latency is each sink task's producer → sink latency (HDR histogram
	// over the task's lifetime), for the tasks that received records.
	Latency []control.Latency `json:"latency,omitempty"`
	// Values are collecting sinks' latest value per key, by sink task, when
	// the job sets ParamReportSinkValues: an end-to-end run's per-key
	// output for an oracle, read after the drain and before the tasks stop.
	Values map[string]map[string]uint64 `json:"values,omitempty"`
}

// MaxReportedSinkValues bounds the keys ParamReportSinkValues may report
// (about 50 bytes each in the history, well under its payload limit).
const MaxReportedSinkValues = 20000

// CollectSinkCounts asks every sink task for its ledger.
func (a *Activities) CollectSinkCounts(ctx context.Context, dep control.Deployment) (SinkCounts, error) {
	var out SinkCounts
	withValues := dep.Job.Params[control.ParamReportSinkValues] == "true"
	reported := 0
	order, groups := tasksByWorker(dep, isSink(dep))
	for _, wid := range order {
		var st control.StatusReply
		req := control.TasksRequest{TaskIDs: groups[wid], WithValues: withValues}
		if err := a.request(ctx, wid, control.VerbStatus, dep.Job.JobID, "", req, &st); err != nil {
			return out, err
		}
		for _, t := range st.Tasks {
			if t.Error != "" {
				return out, fmt.Errorf("sink task %s failed: %s", t.TaskID, t.Error)
			}
			out.Received += t.SinkReceived
			out.Distinct += t.SinkDistinct
			out.Duplicates += t.SinkDuplicates
			out.Reordered += t.SinkReordered
			out.OrderChecked = t.SinkOrderChecked && (out.Tasks == 0 || out.OrderChecked)
			out.Tasks++
			if t.SinkLatency != nil {
				out.Latency = append(out.Latency, *t.SinkLatency)
			}
			if withValues && t.KeyValues != nil {
				if reported += len(t.KeyValues); reported > MaxReportedSinkValues {
					return out, temporal.NewNonRetryableApplicationError(fmt.Sprintf(
						"%s: the sinks hold more than %d keys, too many to report in the run's result; unset it", control.ParamReportSinkValues, MaxReportedSinkValues),
						"SinkValuesTooMany", nil)
				}
				if out.Values == nil {
					out.Values = map[string]map[string]uint64{}
				}
				out.Values[t.TaskID] = t.KeyValues
			}
		}
	}
	return out, nil
}

// SeriesInput selects a per-second series of one operator.
type SeriesInput struct {
	JobID    string `json:"job_id"`
	Operator string `json:"operator"`
}

// Throughput reads an operator's per-second input rate from ClickHouse.
// Without ClickHouse it returns no points.
func (a *Activities) Throughput(ctx context.Context, in SeriesInput) ([]metrics.Point, error) {
	if a.Metrics == nil {
		return nil, nil
	}
	return a.Metrics.Throughput(ctx, in.JobID, in.Operator)
}

// ReconfigEvents reads a job's reconfiguration step rows from ClickHouse.
func (a *Activities) ReconfigEvents(ctx context.Context, jobID string) ([]metrics.ReconfigEvent, error) {
	if a.Metrics == nil {
		return nil, nil
	}
	return a.Metrics.ReconfigEvents(ctx, jobID)
}

// MetricsStart is the time of a job's first metric row: second 0 of the
// series Throughput returns. The zero time means no metrics.
func (a *Activities) MetricsStart(ctx context.Context, jobID string) (time.Time, error) {
	if a.Metrics == nil {
		return time.Time{}, nil
	}
	t, err := a.Metrics.JobStart(ctx, jobID)
	if errors.Is(err, metrics.ErrNoData) {
		return time.Time{}, nil
	}
	return t, err
}
