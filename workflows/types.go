// Package workflows owns the Temporal workflows of koala: running an
// experiment and reconfiguring a running job, one workflow per file. Workflow
// code is deterministic; side effects live in package activities and pure
// planning in package workflows/plan.
package workflows

import (
	"koala/activities"
	"koala/dataplane/control"
	"koala/workflows/autoscale"
)

// TaskQueue is the Temporal task queue served by `koala controller`.
const TaskQueue = "koala-control"

// Protocol names follow the Koala artifact's "ReconfigProtocol" values.
const (
	ProtocolLazy           = "lazy"
	ProtocolStopAndRestart = "stop-and-restart"
	ProtocolDRRS           = "drrs"
)

// ReconfigSpec is one entry of "Reconfigurations".
type ReconfigSpec struct {
	TriggerTimeSeconds int    `json:"trigger_time_seconds"`
	Type               string `json:"type"`
	TargetOperator     string `json:"target_operator"`
	TargetParallelism  int    `json:"target_parallelism"`
	// BucketLoad is the per-bucket load a rebalance plans from
	// (NumBuckets entries, any unit); rebalance only.
	BucketLoad []float64 `json:"bucket_load,omitempty"`
	// TaskID and TargetWorker name the task to move and where; task-migration only.
	TaskID       string `json:"task_id,omitempty"`
	TargetWorker string `json:"target_worker,omitempty"`
}

// planInput is the plan step's request for spec: PlanScale dispatches on
// the kind.
func planInput(in ReconfigureInput, step activities.StepInfo) activities.PlanInput {
	return activities.PlanInput{
		Current: in.Current, Operator: in.Spec.TargetOperator, Parallelism: in.Spec.TargetParallelism,
		Workers: in.Workers, Step: step,
		Kind: in.Spec.Type, BucketLoad: in.Spec.BucketLoad, TaskID: in.Spec.TaskID, TargetWorker: in.Spec.TargetWorker,
	}
}

// ProducerSpec describes the input generator of an experiment.
type ProducerSpec struct {
	Generator  string `json:"generator"`
	RatePerSec int    `json:"rate_per_sec"`
	NumKeys    int    `json:"num_keys"`
	Seed       int64  `json:"seed"`
	ValueSize  int    `json:"value_size"`
	Producers  int    `json:"producers"` // parallel generator instances
	// Skew is the Zipf exponent of the "zipf" generator (0 = uniform).
	Skew float64 `json:"skew,omitempty"`
	// Sequential: see control.ProduceRequest.Sequential.
	Sequential bool `json:"sequential,omitempty"`
	// MaxEvents bounds the records produced over all producers (0 = until
	// the run ends).
	MaxEvents int64 `json:"max_events,omitempty"`
	// Nexmark shapes the "nexmark" generator.
	Nexmark *control.NexmarkSource `json:"nexmark,omitempty"`
}

// ExperimentInput is everything RunExperiment needs; experiments/ builds it
// from an artifact-format JSON config.
type ExperimentInput struct {
	Name                string         `json:"name"`
	QueryName           string         `json:"query_name"`
	TotalRuntimeSeconds int            `json:"total_runtime_seconds"`
	Reconfigurations    []ReconfigSpec `json:"reconfigurations"`
	ReconfigProtocol    string         `json:"reconfig_protocol"`
	StateBackend        string         `json:"state_backend"`
	NumBuckets          int            `json:"num_buckets"`
	BatchSize           int            `json:"batch_size"`
	Partitions          int            `json:"partitions"`
	Parallelism         map[string]int `json:"parallelism"` // operator name → initial parallelism
	Producer            ProducerSpec   `json:"producer"`
	Workers             []string       `json:"workers,omitempty"` // worker ids to use; empty = all that answer
	// ProducerWorkers are the worker ids the input generators run on
	// (round robin); they host no task. Empty: producers share the task
	// workers (producer i on task worker i mod n). See producer_placement.go.
	ProducerWorkers []string          `json:"producer_workers,omitempty"`
	MinWorkers      int               `json:"min_workers"`
	KafkaBrokers    []string          `json:"kafka_brokers"`
	Params          map[string]string `json:"params,omitempty"`
	// DrainTimeoutSeconds bounds the wait for the end of stream after the producer stops.
	DrainTimeoutSeconds int `json:"drain_timeout_seconds"`
	// CheckpointIntervalSeconds > 0 takes an aligned checkpoint of the job
	// at this interval and recovers from the latest one when a worker is
	// lost (run_checkpoints.go); 0 takes none and a lost worker fails the run.
	CheckpointIntervalSeconds int `json:"checkpoint_interval_seconds,omitempty"`
	// Autoscaler, when set, runs the Autoscale workflow as a child once
	// the job's tasks run (autoscale_child.go).
	Autoscaler *autoscale.Policy `json:"autoscaler,omitempty"`
}

// ReconfigureInput starts one reconfiguration of a running job.
type ReconfigureInput struct {
	ReconfigID string               `json:"reconfig_id"`
	Current    control.Deployment   `json:"current"`
	Spec       ReconfigSpec         `json:"spec"`
	Workers    []control.WorkerInfo `json:"workers"`
	// NotifyRoutesSwapped: the lazy protocol signals its parent
	// (signalRoutesSwapped) once routes are swapped, so the parent may
	// take checkpoints of the new deployment while values still migrate.
	NotifyRoutesSwapped bool `json:"notify_routes_swapped,omitempty"`
}

// ReconfigureResult is the deployment after the reconfiguration.
type ReconfigureResult struct {
	Deployment control.Deployment `json:"deployment"`
	Steps      []StepTiming       `json:"steps"`
	// Moves is the keyed state the reconfiguration moved, one entry per
	// await-migration step (none when it moved no state).
	Moves []StateMove `json:"moves,omitempty"`
}

// StateMove is the keyed state one step of a reconfiguration moved between
// tasks, as its AwaitMigration activity measured it.
type StateMove struct {
	// Step is the await-migration step that reported it, e.g.
	// "await-migration" or "subscale-1/2-await-migration"; the Temporal UI
	// shows Summary in that activity's result.
	Step  string `json:"step"`
	Bytes uint64 `json:"bytes"`
	// Millis is the move's duration. Bulk (stop-and-restart, DRRS: an
	// eager handoff, then the new owners pull every moved bucket): from
	// the eager handoff's first request (Handoff's StartedAt) to the end
	// of the last new owner's move (its "migrated" event), so Bytes/Millis
	// is the move's rate. Not bulk (lazy): the await-migration step's own
	// time; values moved while records flowed, from the fast-forward on,
	// so there is no rate. See activities.MigrationReport.
	Millis  float64 `json:"millis"`
	Bulk    bool    `json:"bulk"`
	Summary string  `json:"summary,omitempty"`
}

// MBPerSec is a bulk move's rate in MB/s (10^6 bytes); ok is false for a
// lazy move or one without a duration.
func (m StateMove) MBPerSec() (rate float64, ok bool) {
	if !m.Bulk || !(m.Millis > 0) {
		return 0, false
	}
	return float64(m.Bytes) / 1e6 / (m.Millis / 1000), true
}

// StepTiming records how long one protocol step took (measured by activities).
type StepTiming struct {
	Step   string  `json:"step"`
	Millis float64 `json:"millis"`
}
