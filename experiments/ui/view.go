package ui

import "time"

// JobSummary is one job of /api/jobs: a job the workers run now, or one
// that wrote metric rows recently.
type JobSummary struct {
	ID          string    `json:"id"`
	Experiment  string    `json:"experiment,omitempty"`
	Running     bool      `json:"running"` // some live worker runs a task of it
	Tasks       int       `json:"tasks"`   // tasks on live workers
	Workers     []string  `json:"workers,omitempty"`
	LastMetric  time.Time `json:"last_metric,omitzero"` // its latest task metric row
	TemporalURL string    `json:"temporal_url,omitempty"`
}

// JobView is one job of /api/jobs/{id} and its page.
type JobView struct {
	ID          string         `json:"id"`
	Experiment  string         `json:"experiment,omitempty"`
	At          time.Time      `json:"at"`
	Running     bool           `json:"running"`
	TemporalURL string         `json:"temporal_url,omitempty"`
	Tasks       int            `json:"tasks"`
	Operators   []OperatorView `json:"operators"`
	// Reconfig is the latest reconfiguration while it runs or for a short
	// while after it ended; nil when there is none.
	Reconfig *ReconfigView `json:"reconfig,omitempty"`
	// Timeline is every reconfiguration of the job, oldest first.
	Timeline []ReconfigView `json:"timeline"`
	// Problems names the sources that could not be read (a worker that
	// did not answer, ClickHouse down); the rest of the view stands.
	Problems []string `json:"problems,omitempty"`
}

// OperatorView is one operator of a job with its tasks.
type OperatorView struct {
	Name string `json:"name"`
	// Epoch is the newest routing epoch of the operator that its tasks or
	// its upstreams' tasks use; MinEpoch the oldest (below Epoch while a
	// reconfiguration swaps routes). Zero when no worker reported.
	Epoch    int64        `json:"epoch"`
	MinEpoch int64        `json:"min_epoch"`
	Workers  []WorkerLoad `json:"workers"`
	Tasks    []TaskView   `json:"tasks"`
	Rate     float64      `json:"rate"` // records in per second, summed over its tasks
}

// WorkerLoad counts an operator's tasks on one worker.
type WorkerLoad struct {
	Worker string `json:"worker"`
	Tasks  int    `json:"tasks"`
}

// TaskView is one task: where it runs, what its worker says of it now and
// its latest seconds of metrics.
type TaskView struct {
	ID       string `json:"id"`
	Operator string `json:"operator"`
	Worker   string `json:"worker"`
	// Live is set when the task's worker answered for it just now;
	// Running and Paused are what it said.
	Live    bool  `json:"live"`
	Running bool  `json:"running"`
	Paused  bool  `json:"paused"`
	Epoch   int64 `json:"epoch"`
	// The latest second of metrics: records in, busy share (neither idle
	// nor blocked by backpressure), idle share, Kafka lag (sources).
	Rate     float64 `json:"rate"`
	Busy     float64 `json:"busy"`
	Idle     float64 `json:"idle"`
	KafkaLag uint64  `json:"kafka_lag"`
	// KeysLeft is the entries still in the task's key lookup table: keys
	// whose state has not moved to it yet.
	KeysLeft int    `json:"keys_left"`
	Series   Series `json:"series"`
}

// Series are a task's metrics per second over the view's window: Unix
// seconds and, for each, records in, busy and idle share and Kafka lag.
type Series struct {
	Time []int64   `json:"time"`
	Rate []float64 `json:"rate"`
	Busy []float64 `json:"busy"`
	Idle []float64 `json:"idle"`
	Lag  []float64 `json:"lag"`
}

// Status of a reconfiguration.
const (
	StatusRunning   = "running"   // a step runs, or the last one ended moments ago
	StatusMigrating = "migrating" // the routes are swapped; state still moves
	StatusDone      = "done"
	StatusFailed    = "failed"
)

// ReconfigView is one reconfiguration, from its step events in ClickHouse
// and, while it runs, its tasks' key lookup tables.
type ReconfigView struct {
	ID          string     `json:"id"` // also its workflow id
	Protocol    string     `json:"protocol"`
	Status      string     `json:"status"`
	Step        string     `json:"step"` // the running step, else the last one
	Start       time.Time  `json:"start"`
	End         time.Time  `json:"end,omitzero"` // last event, once done or failed
	Seconds     float64    `json:"seconds"`
	Steps       []StepView `json:"steps"`
	Error       string     `json:"error,omitempty"`
	TemporalURL string     `json:"temporal_url,omitempty"`
	// Migration: keys still in the tasks' lookup tables, the most there
	// were since the start, bytes and keys moved so far (over the view's
	// window), bytes still to move (estimated from the bytes per key moved
	// so far; -1 when nothing moved yet), the bytes per second over the
	// last seconds and the share done (0..1).
	KeysLeft   int     `json:"keys_left"`
	KeysPeak   int     `json:"keys_peak"`
	KeysMoved  uint64  `json:"keys_moved"`
	BytesMoved uint64  `json:"bytes_moved"`
	BytesLeft  float64 `json:"bytes_left"`
	Rate       float64 `json:"rate"`
	Progress   float64 `json:"progress"`
	// RateSeries is the bytes moved per second since the start (Unix
	// seconds, bytes).
	RateTime  []int64   `json:"rate_time,omitempty"`
	RateBytes []float64 `json:"rate_bytes,omitempty"`
}

// StepView is one step of a reconfiguration.
type StepView struct {
	Name   string  `json:"name"`
	Phase  string  `json:"phase"` // start (still running), end or error
	Millis float64 `json:"millis"`
}
