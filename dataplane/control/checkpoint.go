package control

// Checkpoint and snapshot requests: the verbs a worker answers for aligned
// checkpoints (checkpoint barrier injection, abort, commit, restore) and
// for per-task state snapshots (save, load), with their request and reply
// bodies. The store layout these refer to is dataplane/checkpoint's.

// Verbs of checkpoints.
const (
	// VerbCheckpointInject makes the named source tasks (all of the job
	// here when empty) emit checkpoint barrier CheckpointID.
	VerbCheckpointInject = "checkpoint.inject" // CheckpointRequest → CheckpointInjectReply
	// VerbCheckpointAbort stops a task aligning on CheckpointID, releasing
	// what it holds (the checkpoint failed, e.g. a source never injected).
	VerbCheckpointAbort = "checkpoint.abort" // CheckpointRequest
	// VerbCheckpointRestore loads each named, not yet started task's part
	// of checkpoint CheckpointID (sources get their offsets at deploy).
	VerbCheckpointRestore = "checkpoint.restore" // CheckpointRequest → CheckpointRestoreReply
)

// CheckpointRequest names a checkpoint and tasks of a job.
type CheckpointRequest struct {
	CheckpointID string   `json:"checkpoint_id"`
	TaskIDs      []string `json:"task_ids,omitempty"`
	// From maps a task id to the task whose part it loads (restore only;
	// default: the same id).
	From map[string]string `json:"from,omitempty"`
}

// CheckpointInjectReply has the offsets the sources recorded.
type CheckpointInjectReply struct {
	Offsets map[int32]int64 `json:"offsets"`
}

// VerbCheckpointCommit reports checkpoint CheckpointID complete to the
// named tasks (all of the job's tasks on the worker when empty).
const VerbCheckpointCommit = "checkpoint.commit" // CheckpointRequest

// CheckpointRestoreReply lists what each task loaded.
type CheckpointRestoreReply struct {
	Tasks []CheckpointTaskAck `json:"tasks"`
}

// CheckpointTaskAck is what one task reports for its part of a checkpoint.
type CheckpointTaskAck struct {
	TaskID   string `json:"task_id"`
	Operator string `json:"operator"`
	// Kind is what the task saved: "source" (offsets), "keyed" (Pebble
	// checkpoint and key lookup table), "sink" (ledger), "keyed+sink" or
	// "stateless" (nothing).
	Kind  string `json:"kind"`
	Bytes uint64 `json:"bytes"`
	// AlignMillis is the time from the first to the last barrier of the
	// task's inputs (input held meanwhile); SnapshotMillis the time its
	// state took to write.
	AlignMillis    float64 `json:"align_millis"`
	SnapshotMillis float64 `json:"snapshot_millis"`
	// Offsets are a source's next offset per partition at the barrier.
	Offsets map[int32]int64 `json:"offsets,omitempty"`
	// Error says why the task could not take its part; the checkpoint then
	// fails (the barrier is still forwarded, so no task waits for it).
	Error string `json:"error,omitempty"`
}

// Verbs of the snapshot requests.
const (
	VerbSnapshotSave = "snapshot.save" // SnapshotRequest → SnapshotReply
	VerbSnapshotLoad = "snapshot.load" // SnapshotRequest → SnapshotReply (tasks must not be running)
)

// SnapshotRequest names the tasks to snapshot or restore and the directory
// holding one sub-directory per task.
type SnapshotRequest struct {
	TaskIDs []string `json:"task_ids"`
	Dir     string   `json:"dir"`
	// SettleSeconds (save only) lets each store finish the compactions its
	// writes left pending, for at most this long, before its checkpoint;
	// 0 takes the checkpoint at once. A store still compacting at the end
	// is checkpointed as it is: TaskSnapshot.Settled says which. A settled
	// store is then compacted whole in what is left of the time
	// (TaskSnapshot.Compacted).
	SettleSeconds float64 `json:"settle_seconds,omitempty"`
}

// SnapshotReply lists what each task saved or loaded; a save skips the
// named tasks that keep no keyed state.
type SnapshotReply struct {
	Tasks []TaskSnapshot `json:"tasks"`
}

// KLTSegment is one (bucket, owner) part of the key lookup table: the
// 32-bit hashes of the keys of Bucket whose values live on Owner (the table
// keeps hashes, not keys; see statesvc.KLT).
type KLTSegment struct {
	Bucket int      `json:"bucket"`
	Owner  string   `json:"owner"`
	Hashes []uint32 `json:"hashes"`
}

// TaskSnapshot describes one task's snapshot (written as task.json).
type TaskSnapshot struct {
	TaskID     string `json:"task_id"`
	Operator   string `json:"operator"`
	Index      int    `json:"index"`
	NumBuckets int    `json:"num_buckets"`
	Buckets    []int  `json:"buckets"` // owned by the task, ascending
	// Keys is the number of distinct user keys with state; Entries the
	// number of (state, key) values.
	Keys    uint64 `json:"keys"`
	Entries uint64 `json:"entries"`
	Bytes   uint64 `json:"bytes"` // size of the checkpoint's files
	// Settled is true when the store had no compaction pending or running
	// at the checkpoint (SnapshotRequest.SettleSeconds); SettleMillis is
	// how long the task waited for that.
	Settled      bool  `json:"settled,omitempty"`
	SettleMillis int64 `json:"settle_millis,omitempty"`
	// Compacted is true when, after settling, the store was compacted
	// whole with its values rewritten in key order (statesvc.Pebble.
	// CompactAll) within the same time; CompactMillis is how long that took.
	Compacted     bool  `json:"compacted,omitempty"`
	CompactMillis int64 `json:"compact_millis,omitempty"`
	// KLT holds the lookup entries and the addresses of the owners they name.
	KLT       []KLTSegment       `json:"klt,omitempty"`
	KLTOwners map[string]TaskRef `json:"klt_owners,omitempty"`
}
