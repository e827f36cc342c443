// Package cpuprof owns the CPU profiles experiments take of the stack's
// workers while a run goes on: when to take them (from the run's workflow
// history), fetching them from a worker's /debug/pprof endpoint, reading
// them, and the breakdown of a worker's CPU time by what it was doing
// (serving fetches, running the operator, compactions, ...), which names
// the mechanism behind a dip where a top-functions list does not.
// `koala bench --profile` and `koala compare --profile` use it.
package cpuprof
