package metrics

import (
	"slices"
	"time"
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
