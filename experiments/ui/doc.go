// Package ui owns `koala ui`: a live view of the running jobs in the
// browser. It serves, per job, the operators with their tasks per worker,
// each task's input rate, busy and idle share and Kafka lag (small uPlot
// charts refreshed every second), the routing epoch per operator, a running
// reconfiguration's protocol, current step, keys and bytes still to
// migrate and migration rate, and a timeline of past reconfigurations with
// links into the Temporal UI; JSON endpoints (/api/jobs, /api/jobs/{id},
// /api/jobs/{id}/reconfigs) serve the same data.
//
// It reads only what the stack already has: the workers' heartbeats and
// status replies over NATS (which tasks run where, their routing epochs and
// key lookup tables) and the task metric rows and reconfiguration events
// in ClickHouse (rates, lag, busy share, bytes migrated, steps). The pages
// are html/template output with one small script; the charting library is
// uPlot, installed with npm into web/ and copied into assets/ by `make
// ui-assets`, so that `go build` embeds it without npm.
package ui
