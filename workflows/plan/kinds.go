package plan

// Reconfiguration kinds ("Type" in the artifact's configs); each selects
// a planner of this package.
const (
	KindScaleUp   = "scaleup"
	KindScaleDown = "scaledown"
	// KindRebalance moves hot buckets from the most loaded task of
	// TargetOperator to the least loaded ones (Rebalance), planned from
	// ReconfigSpec.BucketLoad; parallelism and placement stay.
	KindRebalance = "rebalance"
	// KindTaskMigration moves task TaskID, keeping its buckets, to worker
	// TargetWorker. It takes two reconfigurations with the same spec (see
	// MigrateTask): the first frees the operator's last task index,
	// the second places a task with that index on TargetWorker.
	// experiments.ParseConfig expands one config entry into both.
	KindTaskMigration = "task-migration"
)
