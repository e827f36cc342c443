package metrics

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// traceSent records the statements ch sends from now on.
func traceSent(ch *ClickHouse) func() []string {
	var mu sync.Mutex
	var sent []string
	ch.traceSQL = func(sql string) {
		mu.Lock()
		sent = append(sent, sql)
		mu.Unlock()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), sent...)
	}
}

// compareRows stores task rows of job "j" over three seconds from
// 1704164645: two counter tasks and a source task that the operator
// filter must leave out.
func compareRows(t *testing.T, ch *ClickHouse) {
	t.Helper()
	base := time.UnixMilli(1704164645000)
	for _, r := range []TaskRow{
		{Time: base, Job: "j", Operator: "counter", Task: "counter-0", BytesTransferred: 10, BatchTimeMaxUs: 1500.5},
		{Time: base.Add(500 * time.Millisecond), Job: "j", Operator: "counter", Task: "counter-0", BatchTimeMaxUs: 200},
		{Time: base.Add(time.Second), Job: "j", Operator: "counter", Task: "counter-1", BytesTransferred: 25, BatchTimeMaxUs: 70000},
		{Time: base.Add(2 * time.Second), Job: "j", Operator: "counter", Task: "counter-0", BatchTimeMaxUs: 900},
		{Time: base, Job: "j", Operator: "source", Task: "source-0", BytesTransferred: 1000, BatchTimeMaxUs: 25.5},
		{Time: base.Add(time.Second), Job: "j", Operator: "source", Task: "source-0", RecordsIn: 3, BatchTimeMaxUs: 25.5},
	} {
		ch.RecordTask(r)
	}
	if err := ch.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestColumnSeriesAndByTask(t *testing.T) {
	ch, db := testClickHouse(t)
	compareRows(t, ch)
	sent := traceSent(ch)
	ctx := context.Background()

	// bytes_transferred is UInt64: its sums come back as float64 Points.
	pts, err := ch.ColumnSeries(ctx, "j", "counter", "bytes_transferred", AggSum)
	if err != nil || len(pts) != 3 || pts[0] != (Point{0, 10}) || pts[1] != (Point{1, 25}) || pts[2] != (Point{2, 0}) {
		t.Fatalf("series %v %v", pts, err)
	}
	q := sent()[1]
	if !strings.Contains(q, "sum(bytes_transferred)) FROM "+db+".task_metrics WHERE job = 'j' AND operator = 'counter' GROUP BY s") {
		t.Fatalf("sql %q", q)
	}
	pts, err = ch.ColumnSeries(ctx, "j", "", "batch_time_max_us", AggMax)
	if err != nil || len(pts) != 3 || pts[0] != (Point{0, 1500.5}) || pts[1] != (Point{1, 70000}) || pts[2] != (Point{2, 900}) {
		t.Fatalf("all-operator series %v %v", pts, err)
	}
	if q := sent()[3]; strings.Contains(q, "operator =") || !strings.Contains(q, "max(batch_time_max_us)") {
		t.Fatalf("all-operator sql %q", q)
	}

	byTask, err := ch.ColumnByTask(ctx, "j", "counter", "batch_time_max_us", AggMax)
	if err != nil {
		t.Fatal(err)
	}
	if len(byTask) != 2 || len(byTask["counter-0"]) != 2 || byTask["counter-0"][0] != (Point{0, 1500.5}) ||
		byTask["counter-0"][1] != (Point{2, 900}) || byTask["counter-1"][0] != (Point{1, 70000}) {
		t.Fatalf("by task %v", byTask)
	}
	if q := sent()[5]; !strings.Contains(q, "SELECT task, "+secondExpr+" AS s, toFloat64(max(batch_time_max_us))") || !strings.Contains(q, "GROUP BY task, s") {
		t.Fatalf("by-task sql %q", q)
	}
}

func TestColumnHelpersRejectBadInput(t *testing.T) {
	// No server: rejected input must not get as far as opening a connection.
	ch := NewClickHouse("http://127.0.0.1:1", "", "koala")
	sent := traceSent(ch)
	ctx := context.Background()
	for _, tc := range []struct{ column, agg string }{
		{"records_in; DROP TABLE x", AggSum}, // not a column
		{"operator", AggSum},                 // String column
		{"ts", AggMax},                       // DateTime
		{"ts_ms", AggMax},                    // the timestamp
		{"kafka_lag", "avg"},                 // aggregation
	} {
		if _, err := ch.ColumnSeries(ctx, "j", "source", tc.column, tc.agg); err == nil {
			t.Errorf("ColumnSeries(%q, %q): no error", tc.column, tc.agg)
		}
		if _, err := ch.ColumnByTask(ctx, "j", "source", tc.column, tc.agg); err == nil {
			t.Errorf("ColumnByTask(%q, %q): no error", tc.column, tc.agg)
		}
	}
	if n := len(sent()); n != 0 {
		t.Fatalf("%d queries sent for rejected input", n)
	}
	for _, c := range []string{"records_in", "kafka_lag", "batch_time_avg_us", "batch_time_max_us", "bytes_transferred", "keys_fetched", "klt_size"} {
		if !numericTaskColumn(c) {
			t.Errorf("%s should be readable", c)
		}
	}
}

func TestColumnHelpersNoData(t *testing.T) {
	ch, _ := testClickHouse(t)
	sent := traceSent(ch)
	ctx := context.Background()
	pts, err := ch.ColumnSeries(ctx, "j", "sink", "records_in", AggSum)
	if err != nil || pts != nil {
		t.Fatalf("series %v %v", pts, err)
	}
	m, err := ch.ColumnByTask(ctx, "j", "sink", "records_in", AggSum)
	if err != nil || m == nil || len(m) != 0 {
		t.Fatalf("by task %v %v", m, err)
	}
	if n := len(sent()); n != 2 {
		t.Fatalf("%d queries, want only the 2 job-start queries", n)
	}
}

// TestColumnHelpersServerError drops a column after the rows went in: the
// job start still reads, the series query fails, and the error carries the
// server's message.
func TestColumnHelpersServerError(t *testing.T) {
	ch, db := testClickHouse(t)
	compareRows(t, ch)
	ctx := context.Background()
	if err := ch.Exec(ctx, "ALTER TABLE "+db+".task_metrics DROP COLUMN records_in"); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.ColumnSeries(ctx, "j", "source", "records_in", AggSum); err == nil || !strings.Contains(err.Error(), "records_in") {
		t.Fatalf("err %v", err)
	}
	if _, err := ch.ColumnByTask(ctx, "j", "source", "records_in", AggSum); err == nil || !strings.Contains(err.Error(), "records_in") {
		t.Fatalf("err %v", err)
	}
}
