package control

// ParamMigrationRate is the job parameter bounding the state bytes per
// second one task's background (eventual) migration pulls from old owners.
// The pulls run beside the task's batches and cost CPU and store time on
// both tasks: unbounded, they took as much as a batch's own work and
// throughput dipped during a lazy rescale. On-demand fetches of keys a
// batch needs are not bounded by it.
const ParamMigrationRate = "LazyByKeyMigrationBytesPerSecond"

// Default and allowed range of ParamMigrationRate. Moving a MiB of small
// values (100 B) costs about 36 ms of CPU over both tasks
// (BenchmarkBatchLatencyDuringMigration's profile), so the default of
// 8 MiB/s takes about a third of a core at most — values of a few KB cost
// far less per byte — and moves a GB-sized task's state in about two
// minutes, while on-demand fetches bring the keys batches need at once.
// Below 64 KiB/s a migration of any real state would not end while the
// job runs.
const (
	DefaultMigrationRate = 8 << 20
	MinMigrationRate     = 64 << 10
	MaxMigrationRate     = 4 << 30
)

// MigrationRate reads ParamMigrationRate of job in bytes per second,
// DefaultMigrationRate when unset.
func MigrationRate(job JobSpec) (int, error) {
	return IntParam(job, ParamMigrationRate, DefaultMigrationRate, MinMigrationRate, MaxMigrationRate, "bytes per second")
}
