package metrics

// Batched INSERTs are the one thing that still goes over ClickHouse's HTTP
// interface; DDL and SELECTs use the native protocol (native.go).
// clickhouse-go's batch INSERT sends "INSERT ... FORMAT Native", which the
// ClickHouse 18.16 that Debian ships does not understand, and clickhouse-go's
// HTTP mode fails against 18.16 as well. A POST of TabSeparated rows works on
// 18.16 and on current servers alike, and it keeps workers (which only
// insert) off the native port.

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// insertHTTP POSTs the TabSeparated lines (each ending in a newline) into
// table with "INSERT ... FORMAT TabSeparated" as the query parameter. Errors
// carry ClickHouse's message.
func (ch *ClickHouse) insertHTTP(ctx context.Context, table, columns string, lines []string) error {
	if ch.baseErr != nil {
		return ch.baseErr
	}
	query := "INSERT INTO " + ch.table(table) + " (" + columns + ") FORMAT TabSeparated"
	u := *ch.base
	q := u.Query()
	q.Set("query", query)
	u.RawQuery = q.Encode()
	body := strings.NewReader(strings.Join(lines, ""))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
	if err != nil {
		return fmt.Errorf("metrics: clickhouse insert into %s: %w", table, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := ch.client.Do(req)
	if err != nil {
		return fmt.Errorf("metrics: clickhouse insert into %s: %w", table, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("metrics: clickhouse insert into %s: reading response: %w", table, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("metrics: clickhouse %s: HTTP %d: %s",
			firstLine(query), resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return nil
}

// tsvEscaper escapes a String value for ClickHouse's TabSeparated format.
var tsvEscaper = strings.NewReplacer(
	`\`, `\\`,
	"\t", `\t`,
	"\n", `\n`,
	"\r", `\r`,
	"\x00", `\0`,
	"\b", `\b`,
	"\f", `\f`,
)

// escapeTSV escapes s for use as a TabSeparated String field.
func escapeTSV(s string) string { return tsvEscaper.Replace(s) }

// tsvLine accumulates one TabSeparated row.
type tsvLine struct{ b []byte }

func (l *tsvLine) sep() {
	if len(l.b) > 0 {
		l.b = append(l.b, '\t')
	}
}

func (l *tsvLine) str(s string) { l.sep(); l.b = append(l.b, escapeTSV(s)...) }
func (l *tsvLine) u64(v uint64) { l.sep(); l.b = strconv.AppendUint(l.b, v, 10) }

// f64 writes a Float64 in a form every ClickHouse version parses (18.16 does
// not accept "+Inf" or "NaN" spelled Go's way in all positions).
func (l *tsvLine) f64(v float64) {
	l.sep()
	switch {
	case math.IsNaN(v):
		l.b = append(l.b, "nan"...)
	case math.IsInf(v, 1):
		l.b = append(l.b, "inf"...)
	case math.IsInf(v, -1):
		l.b = append(l.b, "-inf"...)
	default:
		l.b = strconv.AppendFloat(l.b, v, 'g', -1, 64)
	}
}

// ts writes the DateTime (as a Unix timestamp, independent of the server's
// time zone) and the ts_ms columns.
func (l *tsvLine) ts(t time.Time) {
	ms := t.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	l.u64(uint64(ms / 1000))
	l.u64(uint64(ms))
}

func (l *tsvLine) String() string { return string(append(l.b, '\n')) }

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

// encodeCheckpoint renders r as one TabSeparated line in CheckpointTable
// column order.
func encodeCheckpoint(r CheckpointRow) string {
	var l tsvLine
	l.ts(r.Time)
	l.str(r.Experiment)
	l.str(r.Job)
	l.str(r.CheckpointID)
	l.str(r.Kind)
	l.f64(r.Millis)
	l.u64(r.Bytes)
	l.f64(r.AlignMillis)
	l.u64(uint64(r.Tasks))
	l.str(r.Detail)
	return l.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// PingHTTP checks the HTTP interface the inserts use (ClickHouse answers
// GET /ping with "Ok."). EnsureSchema alone talks to the native port, so a
// wrong --clickhouse URL beside a reachable native port would otherwise
// surface only as failed inserts, long after start.
func (ch *ClickHouse) PingHTTP(ctx context.Context) error {
	if ch.baseErr != nil {
		return ch.baseErr
	}
	u := *ch.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/ping"
	u.RawQuery = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("metrics: clickhouse ping: %w", err)
	}
	resp, err := ch.client.Do(req)
	if err != nil {
		return fmt.Errorf("metrics: clickhouse ping: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if err != nil {
		return fmt.Errorf("metrics: clickhouse ping: reading response: %w", err)
	}
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(data)) != "Ok." {
		return fmt.Errorf("metrics: clickhouse ping: HTTP %d %q, want 200 \"Ok.\" (is this ClickHouse's HTTP port?)", resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return nil
}
