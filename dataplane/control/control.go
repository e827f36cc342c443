// Package control owns the wire contract between the control plane and the
// data-plane workers: NATS subjects, the versioned request/reply envelope,
// every verb a worker answers (checkpoint and snapshot verbs included,
// checkpoint.go) with its request and reply, the job, placement and routing
// types both sides agree on, and every job-parameter name the data plane
// reads (params.go).
//
// Every request names its job and reconfiguration so that a retried
// activity can be recognised and applied at most once by the worker.
package control

import (
	"encoding/json"
	"fmt"
)

// Version is the control-message format version; workers reject others.
const Version = 1

// DefaultNumBuckets is the number of key buckets when a config does not say.
const DefaultNumBuckets = 128

// Subjects. Per-worker request/reply subjects are "koala.worker.<id>.<verb>".
const (
	SubjectPing          = "koala.workers.ping" // every worker replies with a WorkerInfo
	SubjectHeartbeatBase = "koala.heartbeat"    // + "." + worker id, published once a second
	SubjectBarrierBase   = "koala.barrier"      // + "." + job id, published by sinks when a barrier is aligned
	SubjectProgressBase  = "koala.progress"     // + "." + job id, published by tasks while migrating state
	subjectWorkerPrefix  = "koala.worker."      //
	subjectWorkerWildcrd = "koala.worker.%s.>"  //
	subjectWorkerVerb    = "koala.worker.%s.%s" //
	subjectJobBarrier    = SubjectBarrierBase + ".%s"
	subjectJobProgress   = SubjectProgressBase + ".%s"
)

// Verbs a worker answers on its request subject.
const (
	VerbDeploy       = "deploy"        // DeployRequest: create tasks (not yet running)
	VerbStart        = "start"         // TasksRequest: start created tasks
	VerbPause        = "pause"         // BarrierRequest: sources stop reading and emit a barrier
	VerbResume       = "resume"        // TasksRequest: sources read again
	VerbRouting      = "routing"       // RoutingRequest: install a new routing table / upstream set
	VerbStop         = "stop"          // TasksRequest: stop and remove tasks
	VerbFinish       = "finish"        // FinishRequest: sources stop at end offsets and emit end-of-stream
	VerbStatus       = "status"        // TasksRequest: TaskStatus of each task
	VerbProduceStart = "produce.start" // ProduceRequest
	VerbProduceStop  = "produce.stop"  // ProduceStopRequest → ProduceReport
	VerbExportState  = "state.export"  // StateRequest → state moved by bucket ranges (stop-and-restart)
	VerbHandoff      = "state.handoff" // HandoffRequest: lazy protocol key lookup table handoff
)

// WorkerSubject is the request subject of verb on worker id.
func WorkerSubject(workerID, verb string) string {
	return fmt.Sprintf(subjectWorkerVerb, workerID, verb)
}

// WorkerWildcard matches every request subject of one worker.
func WorkerWildcard(workerID string) string { return fmt.Sprintf(subjectWorkerWildcrd, workerID) }

// VerbOf returns the verb of a worker request subject, or "" if it is not one.
func VerbOf(workerID, subject string) string {
	prefix := subjectWorkerPrefix + workerID + "."
	if len(subject) <= len(prefix) || subject[:len(prefix)] != prefix {
		return ""
	}
	return subject[len(prefix):]
}

// HeartbeatSubject is where worker id publishes its heartbeat.
func HeartbeatSubject(workerID string) string { return SubjectHeartbeatBase + "." + workerID }

// BarrierSubject is where sinks of job publish BarrierAligned notices.
func BarrierSubject(jobID string) string { return fmt.Sprintf(subjectJobBarrier, jobID) }

// ProgressSubject is where tasks of job publish MigrationProgress notices.
func ProgressSubject(jobID string) string { return fmt.Sprintf(subjectJobProgress, jobID) }

// Envelope wraps every request.
type Envelope struct {
	Version    int             `json:"v"`
	JobID      string          `json:"job"`
	ReconfigID string          `json:"reconfig,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
}

// Reply wraps every answer. Error is empty on success.
type Reply struct {
	Version int             `json:"v"`
	Error   string          `json:"error,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"`
}

// NewEnvelope encodes body into an envelope.
func NewEnvelope(jobID, reconfigID string, body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", body, err)
	}
	return json.Marshal(Envelope{Version: Version, JobID: jobID, ReconfigID: reconfigID, Body: raw})
}

// DecodeEnvelope parses and checks a request.
func DecodeEnvelope(data []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return env, fmt.Errorf("control message: %w", err)
	}
	if env.Version != Version {
		return env, fmt.Errorf("control message version %d: only version %d is understood", env.Version, Version)
	}
	return env, nil
}

// WorkerInfo describes a live worker.
type WorkerInfo struct {
	ID       string   `json:"id"`
	DataAddr string   `json:"data_addr"` // gRPC address for records and state
	Slots    int      `json:"slots"`
	Tasks    []string `json:"tasks,omitempty"`
}

// OperatorSpec is one node of a job's dataflow.
type OperatorSpec struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"` // registered operator function, e.g. "kafka-source", "map-upper", "count-sink"
	Parallelism int      `json:"parallelism"`
	Inputs      []string `json:"inputs,omitempty"` // upstream operator names
	Keyed       bool     `json:"keyed"`            // input partitioned by key through the routing table
	Stateful    bool     `json:"stateful,omitempty"`
}

// JobSpec is what a worker needs to know about a job to run its tasks.
type JobSpec struct {
	JobID        string            `json:"job_id"`
	Experiment   string            `json:"experiment"`
	Query        string            `json:"query"`
	Operators    []OperatorSpec    `json:"operators"`
	NumBuckets   int               `json:"num_buckets"`
	BatchSize    int               `json:"batch_size"`
	Topic        string            `json:"topic"`
	Partitions   int               `json:"partitions"`
	KafkaBrokers []string          `json:"kafka_brokers"`
	StateBackend string            `json:"state_backend,omitempty"`
	Params       map[string]string `json:"params,omitempty"`
	// ExactnessUnchecked is why the sink ledger cannot check this query
	// (see queries.Query.Unchecked); empty when it does.
	ExactnessUnchecked string `json:"exactness_unchecked,omitempty"`
	// OrderUnchecked is why the sink ledger cannot check per-key order for
	// this query (see queries.Query.Unordered); empty when it does.
	OrderUnchecked string `json:"order_unchecked,omitempty"`
}

// Operator returns the named operator.
func (j JobSpec) Operator(name string) (OperatorSpec, bool) {
	for _, op := range j.Operators {
		if op.Name == name {
			return op, true
		}
	}
	return OperatorSpec{}, false
}

// Downstreams lists the operators that read from name, in job order.
func (j JobSpec) Downstreams(name string) []string {
	var out []string
	for _, op := range j.Operators {
		for _, in := range op.Inputs {
			if in == name {
				out = append(out, op.Name)
			}
		}
	}
	return out
}

// TaskID names task index of operator op.
func TaskID(op string, index int) string { return fmt.Sprintf("%s-%d", op, index) }

// TaskRef places one task.
type TaskRef struct {
	ID       string `json:"id"`
	Operator string `json:"operator"`
	Index    int    `json:"index"`
	WorkerID string `json:"worker"`
	DataAddr string `json:"data_addr"`
}

// RoutingTable maps each bucket of an operator's key space to a task index.
// Epoch grows with every change so that stale updates are ignored.
type RoutingTable struct {
	Operator string `json:"operator"`
	Epoch    int64  `json:"epoch"`
	Buckets  []int  `json:"buckets"`
}

// Deployment is the whole placement of a job at one routing epoch.
type Deployment struct {
	Job     JobSpec        `json:"job"`
	Tasks   []TaskRef      `json:"tasks"`
	Routing []RoutingTable `json:"routing"`
	Epoch   int64          `json:"epoch"`
}

// TasksOf lists the tasks of operator op ordered by index.
func (d Deployment) TasksOf(op string) []TaskRef {
	var out []TaskRef
	for _, t := range d.Tasks {
		if t.Operator == op {
			out = append(out, t)
		}
	}
	// Tasks are kept ordered by (operator, index) by the planner; keep that contract visible.
	for i := 1; i < len(out); i++ {
		for k := i; k > 0 && out[k].Index < out[k-1].Index; k-- {
			out[k], out[k-1] = out[k-1], out[k]
		}
	}
	return out
}

// Table returns the routing table of op.
func (d Deployment) Table(op string) (RoutingTable, bool) {
	for _, rt := range d.Routing {
		if rt.Operator == op {
			return rt, true
		}
	}
	return RoutingTable{}, false
}

// Workers lists the distinct workers used, in task order.
func (d Deployment) Workers() []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range d.Tasks {
		if !seen[t.WorkerID] {
			seen[t.WorkerID] = true
			out = append(out, t.WorkerID)
		}
	}
	return out
}

// DeployRequest creates tasks on one worker. The deployment tells each task
// its downstream tasks, their addresses and routing tables, and its upstreams.
type DeployRequest struct {
	Deployment Deployment `json:"deployment"`
	TaskIDs    []string   `json:"task_ids"`
	// StartOffsets optionally positions source partitions (default: start of topic).
	StartOffsets map[int32]int64 `json:"start_offsets,omitempty"`
}

// TasksRequest names tasks on one worker; empty means all tasks of the job there.
type TasksRequest struct {
	TaskIDs []string `json:"task_ids,omitempty"`
	// WithValues asks collecting sinks for their per-key values (status only).
	WithValues bool `json:"with_values,omitempty"`
	// WithBucketLoad asks keyed tasks for their records per bucket (status only).
	WithBucketLoad bool `json:"with_bucket_load,omitempty"`
}

// BarrierRequest pauses sources and makes them emit barrier BarrierID.
type BarrierRequest struct {
	TaskIDs   []string `json:"task_ids,omitempty"`
	BarrierID string   `json:"barrier_id"`
}

// RoutingRequest installs a new deployment (routing tables, task addresses and
// upstream sets) on every listed task; tasks ignore epochs not newer than theirs.
type RoutingRequest struct {
	Deployment Deployment `json:"deployment"`
	// TaskIDs limits the update to these tasks (empty = all of the job here).
	TaskIDs []string `json:"task_ids,omitempty"`
	// InBand makes each task apply the update on its own goroutine, between
	// batches, and then send a route barrier (id BarrierID) to every task of
	// operator BarrierOperator in its previous routing, so old owners learn
	// when no record routed with the old table can still arrive.
	InBand          bool   `json:"in_band,omitempty"`
	BarrierID       string `json:"barrier_id,omitempty"`
	BarrierOperator string `json:"barrier_operator,omitempty"`
	// BarrierTargets, when set, are the tasks that get the route barrier
	// (the reconfigured operator's old owners) instead of every task of
	// BarrierOperator in the sender's previous routing, and BarrierSenders
	// every task asked to send it: receivers align over exactly these
	// rather than over the upstream set in their own view, which a
	// concurrent reconfiguration of an upstream operator may be changing.
	BarrierTargets []TaskRef `json:"barrier_targets,omitempty"`
	BarrierSenders []string  `json:"barrier_senders,omitempty"`
	// OpenGates makes each listed task (on its own goroutine) install the
	// deployment and start holding what upstreams send it directly for the
	// buckets it gains from other tasks of its operator — records and
	// watermarks — until those old owners say they are drained. Set it only
	// when ordered handoffs from those old owners follow (lazy, DRRS): a
	// watermark that reached a new owner before its old owner forwarded the
	// records routed there earlier would make them late.
	OpenGates bool `json:"open_gates,omitempty"`
}

// HandoffRequest starts the lazy protocol's fast-forward on old owner
// tasks: each installs the new deployment, stops writing the buckets it
// gives away, and sends their key lookup table entries to the new owners.
type HandoffRequest struct {
	Deployment Deployment `json:"deployment"`
	TaskIDs    []string   `json:"task_ids"`
	// Operator is the reconfigured operator; every listed task must be one
	// of its tasks (empty: not checked, for requests from older controllers).
	Operator string `json:"operator,omitempty"`
	// Mode "eager" makes the new owners move every key handed over in the
	// background even when the job migrates on demand (stop-and-restart,
	// DRRS); any other value leaves the job's migration params in charge.
	Mode string `json:"mode"`
	// Ordered makes an eager handoff keep per-key order the way a lazy one
	// does: the new owners hold records sent straight to them for the
	// buckets handed over until each old owner says, behind what it
	// forwarded, that the upstreams' route barriers passed it. A protocol
	// that swaps routes in band while its old owners still forward (DRRS)
	// needs it; one that pauses the sources first (stop-and-restart) does
	// not, and sends no route barrier that would open the gate.
	Ordered bool `json:"ordered,omitempty"`
}

// Migration progress events (MigrationProgress.Event).
const (
	EventKLTInstalled   = "klt-installed"   // a new owner holds the entries handed over by From
	EventForwardingDone = "forwarding-done" // an old owner saw the route barrier from every upstream
	EventMigrated       = "migrated"        // a task's key lookup table is empty: all its keys are local
	EventProgress       = "progress"        // periodic: Remaining keys
)

// MigrationProgress is published by tasks on ProgressSubject(job).
type MigrationProgress struct {
	JobID      string `json:"job"`
	ReconfigID string `json:"reconfig"`
	TaskID     string `json:"task"`
	Operator   string `json:"operator,omitempty"` // the task's operator
	Event      string `json:"event"`
	From       string `json:"from,omitempty"`
	Remaining  int    `json:"remaining"`
	// Bytes, in a "migrated" event, is the state (key + value bytes) the
	// task pulled since its previous "migrated" event: what this
	// reconfiguration moved into it (before, it was the task's running
	// total, so a task that gained keys twice counted the first move again).
	Bytes uint64 `json:"bytes"`
	// At stamps a "migrated" event with the worker's clock (Unix
	// nanoseconds) when the task's lookup table emptied; 0 from older workers.
	At int64 `json:"at,omitempty"`
}

// FinishRequest tells sources the end offsets of the input; after reading up to
// them they emit the end-of-stream barrier BarrierID.
type FinishRequest struct {
	BarrierID  string          `json:"barrier_id"`
	EndOffsets map[int32]int64 `json:"end_offsets"`
}

// TaskStatus reports one task.
type TaskStatus struct {
	TaskID   string `json:"task_id"`
	Operator string `json:"operator"`
	Running  bool   `json:"running"`
	Paused   bool   `json:"paused"`
	// Epoch is the routing epoch of the task's own operator; Epochs adds
	// that of every operator the task routes to (epochs are per operator).
	Epoch      int64            `json:"epoch"`
	Epochs     map[string]int64 `json:"epochs,omitempty"`
	RecordsIn  uint64           `json:"records_in"`
	RecordsOut uint64           `json:"records_out"`
	// Sink exactness accounting (zero for other tasks).
	SinkReceived   uint64 `json:"sink_received,omitempty"`
	SinkDistinct   uint64 `json:"sink_distinct,omitempty"`
	SinkDuplicates uint64 `json:"sink_duplicates,omitempty"`
	// SinkReordered counts records that arrived after a later record of
	// their key from the same source partition; SinkOrderChecked says the
	// sink checks order at all (the job's OrderUnchecked is empty).
	SinkReordered    uint64 `json:"sink_reordered,omitempty"`
	SinkOrderChecked bool   `json:"sink_order_checked,omitempty"`
	// SinkLatency is producer → sink latency of the records received so far
	// (sink tasks only; nil before the first record).
	SinkLatency *Latency `json:"sink_latency,omitempty"`
	// Keyed state: entries still in the key lookup table, keys fetched so far.
	KLTSize int `json:"klt_size,omitempty"`
	// StateCache is the keyed state's value-cache counters since the
	// store opened (nil: no keyed state, or a backend without the cache).
	StateCache *StateCacheStats `json:"state_cache,omitempty"`
	// StateBytes is the keyed state's size in its store (Pebble: sstables,
	// memtable and writes not yet written back), read at most once a
	// second; 0 for tasks without keyed state, before the task started,
	// and with a store shared by tasks (remote-pebble).
	StateBytes uint64 `json:"state_bytes,omitempty"`
	// RouteBarriers lists the route barriers this task aligned (forwarding done).
	RouteBarriers []string `json:"route_barriers,omitempty"`
	// KLTInstalled lists the handoffs this task received: "reconfig/fromTask".
	KLTInstalled []string `json:"klt_installed,omitempty"`
	// Migrated is the task's latest "migrated" event, for a controller
	// that subscribed to the progress events after it was published.
	Migrated *MigrationProgress `json:"migrated,omitempty"`
	// MigrationOwed is the reconfiguration whose "migrated" event this
	// task has yet to publish: its lookup table may be empty already while
	// a last chunk still takes or drops keys at an old owner. "" when none
	// (or from a worker that does not say).
	MigrationOwed string `json:"migration_owed,omitempty"`
	KeysFetched   uint64 `json:"keys_fetched,omitempty"`
	// BucketRecords counts the records a keyed task processed per bucket
	// (NumBuckets entries) since it started; with WithBucketLoad only.
	BucketRecords []uint64 `json:"bucket_records,omitempty"`
	BytesMoved    uint64   `json:"bytes_moved,omitempty"`
	// KeyValues holds a collecting sink's latest value per key (tests, oracles).
	KeyValues map[string]uint64 `json:"key_values,omitempty"`
	// Source positions: next offset to read per partition.
	Offsets map[int32]int64 `json:"offsets,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// StateCacheStats are a keyed task's value-cache counters: keys looked
// up, those the cache answered, and the cache's capacity in bytes.
type StateCacheStats struct {
	Lookups    uint64 `json:"lookups"`
	Hits       uint64 `json:"hits"`
	LimitBytes int64  `json:"limit_bytes"`
}

// StatusReply answers VerbStatus.
type StatusReply struct {
	WorkerID string       `json:"worker"`
	Tasks    []TaskStatus `json:"tasks"`
}

// BarrierAligned is published when a sink task saw barrier BarrierID on every input.
type BarrierAligned struct {
	JobID     string `json:"job"`
	TaskID    string `json:"task"`
	BarrierID string `json:"barrier_id"`
}

// ProduceRequest starts the input generator on a worker.
type ProduceRequest struct {
	Topic        string   `json:"topic"`
	KafkaBrokers []string `json:"kafka_brokers"`
	Generator    string   `json:"generator"` // registered generator name
	// Producer is this producer's index among the job's (SplitProduce): a
	// worker runs one producer per job and index, so several producers of
	// one job can share a worker.
	Producer   int   `json:"producer,omitempty"`
	RatePerSec int   `json:"rate_per_sec"`
	NumKeys    int   `json:"num_keys"`
	Seed       int64 `json:"seed"`
	MaxEvents  int64 `json:"max_events,omitempty"` // 0 = until stopped
	// StartEvent is the generator's index of this producer's first record
	// (a warm-up splits one sequence over its producers).
	StartEvent int64   `json:"start_event,omitempty"`
	ValueSize  int     `json:"value_size,omitempty"`
	Skew       float64 `json:"skew,omitempty"` // Zipf exponent of the "zipf" generator (0 = uniform)
	// Sequential asks a synthetic trace generator for its warm-up stream:
	// record n has key index n mod NumKeys instead of a Zipf draw, so
	// NumKeys records touch every key once (the artifact's "one new key
	// per event" warm-up rule).
	Sequential bool `json:"sequential,omitempty"`
	// Nexmark shapes the "nexmark" generator (nil: its defaults).
	Nexmark *NexmarkSource `json:"nexmark,omitempty"`
	// FilePath, when set, makes a trace generator replay these CSV files
	// instead of generating records (see package queries/traces).
	FilePath []string `json:"file_path,omitempty"`

	// Rate schedule (the artifact's RateLimiterConfig, see
	// dataplane.RateSchedule). When RateLimit is set it replaces RatePerSec:
	// RateLimit[i] events per 200 ms interval for RateChangeInterval[i]
	// intervals, the last rate holding until the producer stops.
	RateLimit          []int64 `json:"rate_limit,omitempty"`
	RateChangeInterval []int64 `json:"rate_change_interval,omitempty"`
}

// NexmarkSource is the artifact's NexmarkSourceConfig: how the Nexmark
// generator shapes its stream. Zero fields take the generator's defaults.
type NexmarkSource struct {
	// EventTypes restricts the stream to these kinds ("Person", "Auction",
	// "Bid"), keeping their order and event times; empty means all.
	// "ClosedAuction" alone selects the closed-auction stream instead (the
	// input of nexmark_query6_modified).
	EventTypes      []string `json:"event_types,omitempty"`
	NumActivePeople int      `json:"num_active_people,omitempty"`
	// Hot ratios: 1 in N auctions (bids) goes to a cold seller (auction,
	// bidder), the rest to the current hot one.
	HotSellersRatio  int `json:"hot_sellers_ratio,omitempty"`
	HotAuctionsRatio int `json:"hot_auctions_ratio,omitempty"`
	HotBiddersRatio  int `json:"hot_bidders_ratio,omitempty"`
	// OutputEventNumber is the number of the first event generated (the
	// resume point after a warm-up); the stream from there is the same for
	// a seed whatever came before.
	OutputEventNumber int64 `json:"output_event_number,omitempty"`
	// Sellers, when set, asks for a closing-auction stream whose auction
	// sellers are "sequential" (one new seller per auction), "uniform" or
	// "zipf" (exponent: the request's Skew) over NumActivePeople.
	Sellers string `json:"sellers,omitempty"`
	// HotSellerRatio (0 to 1, the share of closed auctions sold by the
	// current hot seller), HotSellerRange (one hot seller per that many
	// people) and ExtraPayloadSize (bytes of padding per record) shape the
	// ClosedAuction stream, as the artifact's NexmarkSourceConfig does.
	HotSellerRatio   float64 `json:"hot_seller_ratio,omitempty"`
	HotSellerRange   int     `json:"hot_seller_range,omitempty"`
	ExtraPayloadSize int     `json:"extra_payload_size,omitempty"`
	// Encoding is the generated records' wire form: "binary" (the
	// default, also for "") or "json"; the queries read both.
	Encoding string `json:"encoding,omitempty"`
	// Knobs carries the artifact's NexmarkSourceConfig knobs that no field
	// above holds, by their artifact names, so that a generator can take
	// them up without a new request field: HotAuctionRatio,
	// HotAuctionRange, HotBidderRatio, HotBidderRange, HotCategoryRatio,
	// HotCategoryRange, NumCategories, NumActiveAuctions, NumInFlightEvents,
	// and HotSellerRatio/HotSellerRange of a Person/Auction/Bid stream.
	Knobs map[string]float64 `json:"knobs,omitempty"`
}

// ProduceStopRequest names the producer VerbProduceStop stops (its
// ProduceRequest.Producer; an empty body means producer 0).
type ProduceStopRequest struct {
	Producer int `json:"producer,omitempty"`
}

// ProduceReport answers VerbProduceStop: what Kafka acknowledged.
type ProduceReport struct {
	Acked       int64           `json:"acked"`
	Failed      int64           `json:"failed"`
	PerPart     map[int32]int64 `json:"per_partition"`
	ElapsedSecs float64         `json:"elapsed_secs"`
	// Malformed counts input lines a file-reading generator skipped.
	Malformed int64 `json:"malformed,omitempty"`
}

// Latency is an HDR histogram's summary of producer → sink latency.
type Latency struct {
	Count  uint64 `json:"count"`
	P50Us  int64  `json:"p50_us"`
	P99Us  int64  `json:"p99_us"`
	P999Us int64  `json:"p999_us"`
	MaxUs  int64  `json:"max_us"`
	// Clamped records were older than the histogram's range (counted at its
	// top); Future ones were stamped after the sink's clock (counted as 1 µs).
	Clamped uint64 `json:"clamped,omitempty"`
	Future  uint64 `json:"future,omitempty"`
}
