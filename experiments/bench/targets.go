package bench

// The bench*.go files hold the pure parts of `koala bench` (make bench):
// parsing go test benchmark output (bench_micro), CPU and RSS from /proc
// (bench_proc, bench_rss), the steady-state figures (bench_steady), the
// component ceilings (bench_ceilings), scaling with state (bench_state), the
// phase list (bench_phases) and the BENCHMARKS.md report (bench_report*). The
// orchestration (go test, workflows, ClickHouse, the remote state server, the
// samplers) lives in cmd/koala/bench*.go.

// Targets of issue 8.
const (
	TargetStatelessPerCore = 500_000.0 // events per CPU-second, q1 / stateless
	TargetKeyedPerCore     = 150_000.0 // events per CPU-second, keyed counter on Pebble
	TargetPeakBatchFactor  = 3.0       // lazy: p99 batch time around the reconfiguration ≤ 3 × pre-scale p99
	TargetLagSpeedup       = 5.0       // lazy lag recovery ≥ 5 × faster than stop-and-restart
	TargetKLTBatchNs       = 40_000.0  // KLT lookup of a 1000-key batch ≤ 40 µs
	TargetKLTBytesPerKey   = 3.4       // the original's bytes per key at 40 M keys
)
