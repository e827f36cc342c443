package metrics

import (
	"regexp"
	"strings"
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
