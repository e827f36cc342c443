package control

import (
	"fmt"
	"strconv"
)

// Job parameters. Every name a job's Params map may hold that the data
// plane reads is defined here, once, so the control plane, the experiment
// configs and the workers agree on it. Names follow the Koala artifact
// where it has one.

// Lazy migration modes ("LazyByKeyCancellingTaskMigrationMode").
const (
	ModeFetchOnDemand = "fetch-on-demand"
	ModeEventual      = "eventual"
)

// Job parameters read by the keyed state runtime.
const (
	ParamMigrationMode    = "LazyByKeyCancellingTaskMigrationMode"
	ParamGradualBatchSize = "LazyByKeyGradualMigrationBatchSize"
	// ParamRemotePebbleAddrs lists the state servers of the "remote-pebble"
	// backend: comma-separated host:port, sharded by bucket in this order.
	ParamRemotePebbleAddrs = "RemotePebbleAddrs"
)

// Job params of the dead-letter path.
const (
	// ParamDeadLetterTopic names the topic rejected records are written to
	// (on the job's brokers); empty or absent: counted and skipped.
	ParamDeadLetterTopic = "DeadLetterTopic"
	// ParamMaxRecordBytes bounds len(key)+len(value) of a record; larger
	// records are rejected as oversize by the source and the Kafka sink.
	ParamMaxRecordBytes = "MaxRecordBytes"
)

// Job params of Kafka sinks.
const (
	// ParamKafkaSinkTopic overrides the topic a query's Kafka sinks write to.
	ParamKafkaSinkTopic = "KafkaSinkTopic"
	// ParamKafkaSinkBrokers lists the sink's brokers, comma-separated
	// (default: the job's brokers).
	ParamKafkaSinkBrokers = "KafkaSinkBrokers"
)

// KindKafkaSink is the registered Kafka sink, for queries whose operators
// are listed by kind (queries.Query): it writes to the job's
// ParamKafkaSinkTopic, by default "<job topic>-<operator>".
const KindKafkaSink = "kafka-sink"

// Operator kinds the runtime implements itself.
const (
	KindKafkaSource = "kafka-source"
	KindCountSink   = "count-sink" // counts records; the runtime's ledger checks exactness
)

// KindRecordSink keeps every record it receives in memory, per job, for
// CollectedRecords (tests, examples). It keeps at most MaxCollectedRecords
// per job and counts the rest as dropped.
const KindRecordSink = "record-sink"

// KindCollectSink keeps the latest (largest) counter value per key, so a
// test can compare a keyed aggregate with an oracle after reconfigurations.
const KindCollectSink = "collect-sink"

// ParamMaxOutOfOrderness is the job parameter bounding event-time disorder,
// in milliseconds (default 200).
const ParamMaxOutOfOrderness = "MaxOutOfOrdernessMs"

// ParamSourceIdleTimeout is the job parameter after which a partition that
// delivers nothing stops holding the watermark back, in milliseconds
// (default 1000), provided a fresh end offset shows it has no backlog
// (dataplane/idleness.go).
const ParamSourceIdleTimeout = "SourceIdleTimeoutMs"

// ParamSourceOutageGrace bounds, in milliseconds (default 10000, ≥ 0), how
// long after its source reaches the broker again a partition that went
// through an outage (its end offset could not be looked up) and delivered
// nothing since keeps holding the watermark back (dataplane/idleness.go).
const ParamSourceOutageGrace = "SourceOutageGraceMs"

// Job parameters of the Kafka source's fetches.
const (
	ParamSourceFetchMinBytes  = "SourceFetchMinBytes"
	ParamSourceFetchMaxWaitMs = "SourceFetchMaxWaitMs"
)

// ParamSourceMaxInFlightRecords bounds how far a source task reads ahead
// of its downstream: the records it handed to the next operator's tasks
// that those have not yet processed. Unset, it is
// DefaultSourceInFlightBatches batches of the job's BatchSize.
const ParamSourceMaxInFlightRecords = "SourceMaxInFlightRecords"

// Default and largest ParamSourceMaxInFlightRecords. Sixteen batches keep
// the source's next batches ready while the downstream works on earlier
// ones (the acknowledgement of a batch comes back after it was processed),
// without hiding more than a moment of input inside the pipeline.
const (
	DefaultSourceInFlightBatches = 16
	MaxSourceMaxInFlightRecords  = 1 << 24
)

// ParamTaskInboxMaxRecords bounds the records of data frames waiting in
// one processing task's inbox; a frame is taken while fewer wait, so a
// frame larger than the bound still passes alone. Unset, it is
// DefaultTaskInboxBatches batches of the job's BatchSize. The inbox's
// frame bound alone let it hold 64 whole batches: a second or more of a
// slow task's work that a route barrier behind them waits out.
const ParamTaskInboxMaxRecords = "TaskInboxMaxRecords"

// Default and largest ParamTaskInboxMaxRecords. Eight batches keep a task
// busy while its senders refill the inbox.
const (
	DefaultTaskInboxBatches = 8
	MaxTaskInboxMaxRecords  = 1 << 24
)

// TaskInboxMaxRecords reads ParamTaskInboxMaxRecords of job.
func TaskInboxMaxRecords(job JobSpec) (int, error) {
	def := min(DefaultTaskInboxBatches*max(job.BatchSize, 1), MaxTaskInboxMaxRecords)
	return IntParam(job, ParamTaskInboxMaxRecords, def, 1, MaxTaskInboxMaxRecords, "records")
}

// IntParam reads a whole-number job parameter within [lo, hi], def when
// unset; its error names the parameter, its unit and the range.
func IntParam(job JobSpec, name string, def, lo, hi int, unit string) (int, error) {
	s, ok := job.Params[name]
	if !ok || s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("job param %s %q: want a whole number of %s between %d and %d", name, s, unit, lo, hi)
	}
	return n, nil
}

// ParamStateMigrationChunkSize is the job parameter (the artifact's
// StateMigrationChunkSize) bounding the bytes of one chunk of keyed state
// that stop-and-restart copies between tasks.
const ParamStateMigrationChunkSize = "StateMigrationChunkSize"

// Default and largest ParamStateMigrationChunkSize; a chunk is sent as one
// state-plane message, and those are at most 64 MiB.
const (
	DefaultStateMigrationChunkSize = 1 << 20
	MaxStateMigrationChunkSize     = 64 << 20
)

// StateMigrationChunkSize reads ParamStateMigrationChunkSize of job, in
// bytes, DefaultStateMigrationChunkSize when unset.
func StateMigrationChunkSize(job JobSpec) (int, error) {
	return IntParam(job, ParamStateMigrationChunkSize, DefaultStateMigrationChunkSize, 1, MaxStateMigrationChunkSize, "bytes")
}

// ParamCheckpointStore is the job parameter naming the checkpoint store
// location (a directory path, or file://path). Every worker and the
// controller must reach it under that name.
const ParamCheckpointStore = "CheckpointStore"

// ParamPendingMigration + operator name is the job parameter that carries
// a half-done task migration between its two steps.
const ParamPendingMigration = "koala.PendingTaskMigration."

// ParamNumSubscales is the job parameter that sets how many subscales a
// DRRS-style reconfiguration uses (0 or absent: one per moving pair).
const ParamNumSubscales = "NumSubscales"

// ParamTaskPlacement chooses how the first deployment places tasks
// (workflows/plan: PlacementRoundRobin or PlacementColocate).
const ParamTaskPlacement = "TaskPlacement"

// Warm-up parameters (workflows/warmup.go): a warm-up run ("IsWarmUp")
// builds state and snapshots it; a measurement run ("LoadWarmUpData")
// loads it and resumes the generator at "OutputEventNumber".
const (
	ParamIsWarmUp          = "IsWarmUp"
	ParamLoadWarmUpData    = "LoadWarmUpData"
	ParamNumEvents         = "NumEvents"
	ParamOutputEventNumber = "OutputEventNumber"
	ParamWarmUpSnapshotDir = "WarmUpSnapshotDir"
)

// ParamReportSinkValues ("true") makes CollectSinkCounts return collecting
// sinks' per-key values in the run's result. The result is stored in the
// workflow's history, so this is for small key spaces (tests, oracles):
// more than MaxReportedSinkValues keys fail the collection.
const ParamReportSinkValues = "ReportSinkValues"

// ParamWindowDuration is the job parameter that overrides window sizes.
const ParamWindowDuration = "WindowDuration"

// ParamDummyFieldSize pads state values (the artifact's DummyFieldSize):
// the counter's 8-byte count, q6*'s kept prices and twitch's state are
// followed by that many bytes (default 0), so the state per key can be made
// as large as a state-size experiment needs.
const ParamDummyFieldSize = "DummyFieldSize"

// ParamSinkKind chooses where a query's runtime sinks (counting,
// collecting, recording) write: SinkKindDefault keeps them, SinkKindKafka
// replaces each by KindKafkaSink, which writes (key, value) to
// the job's KafkaSinkTopic (transactionally when the job takes
// checkpoints). The sink task's exactness ledger is the same either way:
// it belongs to the terminal task, not to the operator.
const ParamSinkKind = "SinkKind"

// ParamListStateSize and ParamListLength size the trace queries' list
// state (the artifact's fields of the same names): how many of a key's
// latest entries azure's cpuReadingStats and borg's jobEventStats
// (ListStateSize) and taxi's movingMedianTripTime (ListLength) keep.
// Unset, each query keeps its artifact default; MaxListSize bounds both,
// since every event of a key rewrites its whole list.
const (
	ParamListStateSize = "ListStateSize"
	ParamListLength    = "ListLength"
	MaxListSize        = 1 << 16
)
