package metrics

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// CheckpointRow is one completed checkpoint (Kind "checkpoint") or one
// recovery from a checkpoint (Kind "recovery").
type CheckpointRow struct {
	Time                          time.Time
	Experiment, Job, CheckpointID string
	Kind                          string
	Millis                        float64 // checkpoint: injection to last ack; recovery: loss known to tasks running
	Bytes                         uint64  // checkpoint: size of every task's part
	AlignMillis                   float64 // checkpoint: longest alignment of any task
	Tasks                         uint32
	Detail                        string
}

// CheckpointTable holds CheckpointRow values.
const CheckpointTable = "checkpoint_events"

// checkpointColumnDefs are the columns of CheckpointTable, in insert order.
const checkpointColumnDefs = `ts DateTime, ts_ms UInt64, experiment String, job String, checkpoint_id String, kind String, ` +
	`millis Float64, bytes UInt64, align_millis Float64, tasks UInt64, detail String`

// Kinds of a CheckpointRow.
const (
	CheckpointKindCheckpoint = "checkpoint"
	CheckpointKindRecovery   = "recovery"
)

// CheckpointRecorder receives checkpoint and recovery rows. It is separate
// from Recorder so recorders that keep no such rows need not change.
type CheckpointRecorder interface {
	RecordCheckpoint(CheckpointRow)
}

// RecordCheckpoint implements CheckpointRecorder.
func (Nop) RecordCheckpoint(CheckpointRow) {}

// RecordCheckpoint implements CheckpointRecorder.
func (m *Memory) RecordCheckpoint(r CheckpointRow) {
	m.mu.Lock()
	m.checkpoints = append(m.checkpoints, r)
	m.mu.Unlock()
}

// Checkpoints returns a copy of the recorded checkpoint rows in arrival order.
func (m *Memory) Checkpoints() []CheckpointRow {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.checkpoints)
}

// CheckpointRows returns the job's checkpoint and recovery rows ordered by time.
func (ch *ClickHouse) CheckpointRows(ctx context.Context, job string) ([]CheckpointRow, error) {
	out := []CheckpointRow{}
	err := ch.selectRows(ctx, "SELECT ts_ms, experiment, job, checkpoint_id, kind, millis, bytes, align_millis, tasks, detail FROM "+
		ch.table(CheckpointTable)+" WHERE job = "+quoteString(job)+" ORDER BY ts_ms",
		func(r driver.Rows) error {
			var ms, tasks uint64
			var c CheckpointRow
			if err := r.Scan(&ms, &c.Experiment, &c.Job, &c.CheckpointID, &c.Kind, &c.Millis, &c.Bytes, &c.AlignMillis, &tasks, &c.Detail); err != nil {
				return err
			}
			c.Time, c.Tasks = time.UnixMilli(int64(ms)), uint32(tasks)
			out = append(out, c)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("metrics: checkpoint rows of %q: %w", job, err)
	}
	return out, nil
}
