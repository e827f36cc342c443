package metrics

import (
	"regexp"
	"strings"
	"time"
)

// Table names inside the configured database.
const (
	TaskTable     = "task_metrics"
	ReconfigTable = "reconfig_events"
)

// Columns of the two tables, in insert order. Only DateTime, String, Float64
// and UInt64 are used so the schema runs on ClickHouse 18.16 and on current
// servers alike. ts_ms orders events within a second.
const (
	taskColumnDefs = `ts DateTime, ts_ms UInt64, experiment String, job String, operator String, task String, worker String, ` +
		`records_in UInt64, records_out UInt64, batches UInt64, batch_time_avg_us Float64, batch_time_max_us Float64, ` +
		`queue_time_avg_us Float64, kafka_lag UInt64, idle_ratio Float64, backpressure_ratio Float64, ` +
		`multi_get_us Float64, multi_put_us Float64, key_lookup_us Float64, keys_per_batch Float64, ` +
		`bytes_transferred UInt64, keys_fetched UInt64, klt_size UInt64, klt_bytes UInt64, ` +
		badRecordColumnDefs + ", " + batchHistColumnDefs
	// badRecordColumnDefs were added to task_metrics after its first
	// release; EnsureSchema adds them to older tables (addMissingColumns).
	badRecordColumnDefs = `malformed_records UInt64, oversize_records UInt64, dead_lettered UInt64, late_events UInt64`
	// batchHistColumnDefs were added later still: the second's batch
	// times as an encoded HDR histogram (batch_hist.go).
	batchHistColumnDefs = `batch_time_hdr String`
	reconfigColumnDefs  = `ts DateTime, ts_ms UInt64, experiment String, job String, reconfig_id String, protocol String, ` +
		`step String, phase String, millis Float64, detail String`
)

// columnNames strips the types from a column definition list.
func columnNames(defs string) string {
	parts := strings.Split(defs, ", ")
	for i, p := range parts {
		parts[i], _, _ = strings.Cut(p, " ")
	}
	return strings.Join(parts, ", ")
}

var plainIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ident quotes a database name that is not a plain identifier.
func ident(s string) string {
	if plainIdent.MatchString(s) {
		return s
	}
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(s) + "`"
}

// quoteString returns s as a ClickHouse SQL string literal.
func quoteString(s string) string {
	return `'` + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + `'`
}

// encodeTask renders r as one TabSeparated line (with trailing newline) in
// task_metrics column order. The time is truncated to the second.
func encodeTask(r TaskRow) string {
	var l tsvLine
	l.ts(r.Time.Truncate(time.Second))
	l.str(r.Experiment)
	l.str(r.Job)
	l.str(r.Operator)
	l.str(r.Task)
	l.str(r.Worker)
	l.u64(r.RecordsIn)
	l.u64(r.RecordsOut)
	l.u64(r.Batches)
	l.f64(r.BatchTimeAvgUs)
	l.f64(r.BatchTimeMaxUs)
	l.f64(r.QueueTimeAvgUs)
	l.u64(r.KafkaLag)
	l.f64(r.IdleRatio)
	l.f64(r.BackpressureRatio)
	l.f64(r.MultiGetUs)
	l.f64(r.MultiPutUs)
	l.f64(r.KeyLookupUs)
	l.f64(r.KeysPerBatch)
	l.u64(r.BytesTransferred)
	l.u64(r.KeysFetched)
	l.u64(r.KLTSize)
	l.u64(r.KLTBytes)
	l.u64(r.Malformed)
	l.u64(r.Oversize)
	l.u64(r.DeadLettered)
	l.u64(r.LateEvents)
	l.str(r.BatchTimeHDR)
	return l.String()
}

// encodeReconfig renders e as one TabSeparated line in reconfig_events column
// order, keeping millisecond precision.
func encodeReconfig(e ReconfigEvent) string {
	var l tsvLine
	l.ts(e.Time)
	l.str(e.Experiment)
	l.str(e.Job)
	l.str(e.ReconfigID)
	l.str(e.Protocol)
	l.str(e.Step)
	l.str(e.Phase)
	l.f64(e.Millis)
	l.str(e.Detail)
	return l.String()
}
