// Package traces owns the paper's four trace queries — azure, borg, taxi
// and twitch — and their input generators. Each generator reproduces its
// trace's record layout and key distribution (a Zipf over NumKeys ids, so
// a few VMs, jobs, routes or streams dominate as in the real traces) and is
// deterministic for a seed; with FilePath set it replays real trace CSV
// files instead. Generators and queries share a name and are registered
// with dataplane.RegisterGenerator and queries.Register.
//
// A record's value is one CSV line in its trace's column layout; its key is
// what the query's first operator is keyed by. The columns, in file order:
//
//	azure  (Azure public dataset, vm_cpu_readings; no header)
//	       timestamp (s), vm id, min cpu, max cpu, avg cpu
//	       key: vm id
//	borg   (Google cluster trace 2011, task_events; no header)
//	       time (µs), missing info, job id, task index, machine id,
//	       event type (0–8), user, scheduling class, priority,
//	       cpu request, ram request, disk request, different-machine constraint
//	       empty machine id and requests read as 0; key: "<job id>_<event type>"
//	taxi   (NYC taxi trip_data 2013; one header line per file)
//	       medallion, hack license, vendor id, rate code, store-and-forward
//	       flag, pickup time, dropoff time ("2006-01-02 15:04:05"),
//	       passenger count, trip time (s), trip distance (mi), pickup lon,
//	       pickup lat, dropoff lon, dropoff lat
//	       rows outside the 300×300 grid of 500 m cells or with dropoff
//	       before pickup are unusable; key: the pickup cell "x.y", so every
//	       trip of a route passes one source partition in order
//	twitch (viewing events; one header line per file)
//	       user id, stream id, streamer name, time (s), event type
//	       (ENTER or LEAVE); key: user id
//
// File input: every path is read in order, and the files are replayed
// from the start when the producer wants more records than they hold (set
// MaxEvents to read them once). Lines that do not parse are skipped and
// counted — the producer reports them as ProduceReport.Malformed and
// ReadCSV returns their number — and logged, rate-limited. With several
// producers the files are dealt out among them (dataplane.SplitProduce), so
// no file is read twice.
//
// The queries (operator names as in the original artifact, so its
// "<Operator>Parallelism" config fields apply):
//
//	azure:  source → cpuReadingStats (last 80 readings per VM: running
//	        median and mean of avg cpu, max of max cpu) → sink
//	borg:   source → jobEventStats (last 10 events per job and event type:
//	        mean and max of the cpu, ram and disk requests) → sink
//	taxi:   source → calculateCellId (stateless: route = pickup cell →
//	        dropoff cell) → movingMedianTripTime (median trip time over the
//	        route's last 150 trips) → sink
//	twitch: source → userSessions (streams a user watches) →
//	        streamViewers (viewers, joins, leaves, watch time per stream) →
//	        streamSummary (updates and peak viewers per stream) → sink
//
// Every stateful operator emits exactly one record per input record, so
// the exactness ledger of the counting sink holds. Each stream of
// twitch's streamViewers holds a pad of job parameter "DummyFieldSize"
// bytes (default 15360), written once when the stream is first seen, to
// model the original's state size, as the original pads only that
// operator's state. Malformed records reaching a
// query are counted ("malformed_records") and skipped.
package traces
