// Package bench is `koala bench` (make bench): every phase of the benchmark
// suite and its orchestration. Micro-benchmarks run as `go test -bench` so
// their numbers are those a developer gets; steady state, large state,
// disruption and RSS runs start workflows on the local stack and sample the
// workers' CPU and RSS from /proc (and their state's size on disk and
// value caches); the component ceilings run in this process against the
// stack's Kafka; scaling with state runs on an in-process cluster
// (subpackage inproc); the report is BENCHMARKS.md plus raw JSON.
//
// Run is the entry point; Options carries every setting and the clients,
// so nothing here reads flags or the environment.
package bench
