// Package dataplane is the worker runtime: the operator API queries are
// written against, and the tasks that run them, route their records by key,
// keep their state and hand it over when the job is reconfigured. The
// ground it stands on lives in leaf packages that never import it:
//
//	wire        Record, Frame, the frame codec and buffer pools
//	control     the control-plane contract: NATS subjects, every verb and
//	            message, every job-parameter name
//	transport   NATS and gRPC credentials, TLS, redaction of secrets
//	exchange    worker-to-worker gRPC streams and the state-fetch call
//	checkpoint  the checkpoint store, manifests and snapshot layout
//	kafkaio     the source's partition reader, the transactional sink
//	            writer, the dead-letter path
//	produce     input generators, rate schedules and the Kafka producer
//	metrics     per-task metrics and their ClickHouse tables
//
// Files of this package, by group:
//
// Operator API — what a query is made of: api.go (QueryBuilder, Stream),
// operator.go (Operator, OperatorContext, the registry), record.go (Record),
// state.go and liststate.go (value and list state), window.go and
// timer_index.go (tumbling and sliding windows), join.go (windowed joins),
// keyvalues.go and sink_kafka.go (built-in sinks).
//
// Task runtime — how a worker runs tasks: worker.go (the worker process,
// deploy and status), handlers.go (control requests over NATS, run on the
// task goroutine), task.go (a task's loop, batching and outputs),
// routing.go (bucket → task tables), source.go (the source task's control
// loop), source_credit.go and credit_return.go (how far a source reads
// ahead of the tasks after it, and their acknowledgements), watermark.go
// (event time), latency.go and ledger.go (what sinks measure and count),
// counters.go (operator and source counters), worker_produce.go
// (producers inside a worker).
//
// Keyed state and the Koala protocol — lazy, per-key migration: stateful.go
// (state per batch, the key lookup table consulted for moved keys),
// handoff.go and handoff_ack.go (the lookup-table handoff from old to new
// owners), route_drain.go (route gates and drain markers that keep each
// key's order across a routing swap), statefetch.go (serving and making
// state fetches), migrator.go (background migration beside the batches,
// under a byte-rate budget, hottest buckets first), migrate.go (migration
// steps on the task goroutine and the "migrated" report), handoff_push.go
// (bulk moves).
//
// Checkpoints and snapshots: checkpoint_barrier.go (aligned barriers and
// the rule that no checkpoint captures a half-moved key), checkpoint_klt.go
// (lookup tables and served values in a part), checkpoint_restore.go,
// checkpoint_commit.go (two-phase sinks), snapshot.go (one task's state,
// saved and loaded; warm-up uses it).
//
// Output written to Kafka is exactly once, for read_committed consumers,
// when the job takes checkpoints: the Kafka sink then writes in
// transactions committed only once the checkpoint covering them has
// completed (kafkaio/txn.go). The cost is latency: a record becomes
// visible only after the next checkpoint's barrier reached the sink and
// that checkpoint completed, on average half a checkpoint interval plus the
// checkpoint's duration, at most one interval plus it. Without checkpoints
// the Kafka sink writes at once and is at least once.
package dataplane
