package bench

// Targets of issue 8.
const (
	TargetStatelessPerCore = 500_000.0 // events per CPU-second, q1 / stateless
	TargetKeyedPerCore     = 150_000.0 // events per CPU-second, keyed counter on Pebble
	TargetPeakBatchFactor  = 3.0       // lazy: p99 batch time around the reconfiguration ≤ 3 × pre-scale p99
	TargetLagSpeedup       = 5.0       // lazy lag recovery ≥ 5 × faster than stop-and-restart
	TargetKLTBatchNs       = 40_000.0  // KLT lookup of a 1000-key batch ≤ 40 µs
	TargetKLTBytesPerKey   = 3.4       // the original's bytes per key at 40 M keys
	// The paper's claim that the KLT lookup costs a stateful batch at most
	// this share of its time, in percent.
	TargetKLTBatchSharePct = 3.0
)

// KLTShareBench is the micro-benchmark (package koala/dataplane) that
// reports the KLT lookup's share of a stateful batch: metric units
// KLTShareUnit and KLTShareNsUnit.
const (
	KLTShareBench  = "StatefulBatchKLTShare"
	KLTShareUnit   = "klt-pct-of-batch"
	KLTShareNsUnit = "klt-ns/batch"
)
