package control

// ParamReconfigHoldBytes bounds, in bytes of records, what a task holds
// back during a reconfiguration: a new owner's direct records that wait
// until their old owner has forwarded everything routed to it the old way
// (dataplane/route_drain.go), and an old owner's forwarded records that
// wait behind the lookup entries of a handoff still being sent
// (dataplane/handoff.go), and, outside reconfigurations, the frames a
// task keeps while it aligns a checkpoint barrier (those of inputs whose
// barrier arrived; dataplane/checkpoint_barrier.go). At the bound the task
// stops taking more from the senders (they wait) instead of growing.
const ParamReconfigHoldBytes = "ReconfigHoldMaxBytes"

// Default and allowed range of ParamReconfigHoldBytes. The default holds a
// few seconds of input at the rates a task sustains here; a bound under a
// few batches would stop senders after every batch.
const (
	DefaultReconfigHoldBytes = 64 << 20
	MinReconfigHoldBytes     = 64 << 10
	MaxReconfigHoldBytes     = 4 << 30
)

// ReconfigHoldBytes reads ParamReconfigHoldBytes of job in bytes,
// DefaultReconfigHoldBytes when unset.
func ReconfigHoldBytes(job JobSpec) (int, error) {
	return IntParam(job, ParamReconfigHoldBytes, DefaultReconfigHoldBytes, MinReconfigHoldBytes, MaxReconfigHoldBytes, "bytes")
}
