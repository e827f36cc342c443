package control

// ParamHandoffHotBytes bounds, in bytes of state (keys and values), what a
// lazy handoff's old owner sends along with its lookup entries: the state
// of the keys of the buckets it gives away that its value cache holds,
// those it wrote last first (dataplane/handoff_hot.go). Those keys leave
// the lookup table at once; every other key stays lazy, fetched on demand
// or in the background. 0 sends none, every key then moves lazily.
const ParamHandoffHotBytes = "LazyHandoffHotBytes"

// Default and allowed range of ParamHandoffHotBytes. The new owner's
// records of the moving buckets wait for the handoff's end, which comes
// after this state: at the ~380 MB/s a bulk move reaches here
// (stop-and-restart, EXPERIMENTS.md) 16 MiB holds them back about 40 ms,
// where the on-demand fetches of as many keys took the new owner's first
// second. Past 1 GiB it is a bulk move, which stop-and-restart and DRRS
// already are.
const (
	DefaultHandoffHotBytes = 16 << 20
	MaxHandoffHotBytes     = 1 << 30
)

// HandoffHotBytes reads ParamHandoffHotBytes of job in bytes,
// DefaultHandoffHotBytes when unset.
func HandoffHotBytes(job JobSpec) (int, error) {
	return IntParam(job, ParamHandoffHotBytes, DefaultHandoffHotBytes, 0, MaxHandoffHotBytes, "bytes")
}
