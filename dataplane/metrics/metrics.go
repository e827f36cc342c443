// Package metrics owns the per-task metric rows and reconfiguration events and
// their storage in ClickHouse.
package metrics

import (
	"slices"
	"sync"
	"time"
)

// TaskRow is one task's counters for one second (Koala's metric names in
// comments).
type TaskRow struct {
	Time                           time.Time // second the row covers (truncated to the second when stored)
	Experiment, Job, Operator      string
	Task, Worker                   string
	RecordsIn, RecordsOut          uint64  // input / output rate
	Batches                        uint64  // batches processed in this second
	BatchTimeAvgUs, BatchTimeMaxUs float64 // per-batch processing time
	QueueTimeAvgUs                 float64 // queueing time
	KafkaLag                       uint64  // source tasks: records not yet processed by the next operator (end offsets - positions + read but unprocessed)
	IdleRatio, BackpressureRatio   float64 // idle and backpressure rate
	MultiGetUs, MultiPutUs         float64 // multi-get / multi-put time
	KeyLookupUs                    float64 // KeyLookUpTime
	KeysPerBatch                   float64
	BytesTransferred               uint64 // NumBytesTransferred by state migration
	KeysFetched                    uint64
	KLTSize                        uint64 // entries in the key lookup table
	KLTBytes                       uint64
	// Bad input, records in this second: unparseable and over the size
	// limit (both go the dead-letter path), written to the dead-letter
	// topic, and late events (after the watermark passed them).
	Malformed, Oversize, DeadLettered, LateEvents uint64
	// BatchTimeHDR is this second's per-batch processing times as an
	// encoded HDR histogram (BatchHist.Take); "" when no batch ran.
	BatchTimeHDR string
}

// Phases of a ReconfigEvent.
const (
	PhaseStart = "start"
	PhaseEnd   = "end"
	PhaseError = "error"
)

// ReconfigEvent marks the start, end or failure of a reconfiguration or of one
// of its steps.
type ReconfigEvent struct {
	Time                        time.Time
	Experiment, Job, ReconfigID string
	Protocol, Step, Phase       string // Phase: PhaseStart | PhaseEnd | PhaseError
	Millis                      float64
	Detail                      string
}

// Recorder receives metric rows and reconfiguration events. Implementations
// must be safe for concurrent use and must not block for long.
type Recorder interface {
	RecordTask(TaskRow)
	RecordReconfig(ReconfigEvent)
}

// Point is one sample of a per-second series. Sec counts seconds since the
// job's first metric row, so series of one job align.
type Point struct {
	Sec   float64
	Value float64
}

// Nop is a Recorder that discards everything.
type Nop struct{}

// RecordTask implements Recorder.
func (Nop) RecordTask(TaskRow) {}

// RecordReconfig implements Recorder.
func (Nop) RecordReconfig(ReconfigEvent) {}

// Memory is an in-memory Recorder for tests. It is safe for concurrent use and
// its accessors return copies.
type Memory struct {
	mu       sync.Mutex
	tasks    []TaskRow
	reconfig []ReconfigEvent
	// checkpoints are CheckpointRow values (checkpoint.go).
	checkpoints []CheckpointRow
}

// NewMemory returns an empty Memory recorder.
func NewMemory() *Memory { return &Memory{} }

// RecordTask implements Recorder.
func (m *Memory) RecordTask(r TaskRow) {
	m.mu.Lock()
	m.tasks = append(m.tasks, r)
	m.mu.Unlock()
}

// RecordReconfig implements Recorder.
func (m *Memory) RecordReconfig(e ReconfigEvent) {
	m.mu.Lock()
	m.reconfig = append(m.reconfig, e)
	m.mu.Unlock()
}

// Tasks returns a copy of the recorded task rows in arrival order.
func (m *Memory) Tasks() []TaskRow {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.tasks)
}

// Reconfigs returns a copy of the recorded reconfiguration events in arrival
// order.
func (m *Memory) Reconfigs() []ReconfigEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reconfig)
}

// Reset discards everything recorded so far.
func (m *Memory) Reset() {
	m.mu.Lock()
	m.tasks, m.reconfig = nil, nil
	m.mu.Unlock()
}

var (
	_ Recorder = Nop{}
	_ Recorder = (*Memory)(nil)
	_ Recorder = (*ClickHouse)(nil)
)
