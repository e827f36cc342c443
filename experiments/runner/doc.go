// Package runner starts experiment workflows on Temporal, follows them to
// their end and turns their results into the summaries `koala run`, `koala
// suite`, `koala compare` and `koala figures` print and write; it builds
// `koala warmup`'s warm-up snapshots with their progress; it also sends
// `koala reconfigure`'s update to a running job and runs `koala produce`'s
// producers. It gets its Temporal and ClickHouse clients from the caller, so
// the same code serves the command line and the benchmark harness.
package runner
