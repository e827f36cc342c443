package metrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// compareFake answers the queries of the compare read helpers and records
// the SQL it was sent.
func compareFake(t *testing.T, answer func(sql string) (int, string)) (*ClickHouse, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var sent []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = append(sent, string(b))
		mu.Unlock()
		code, body := answer(string(b))
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return NewClickHouse(srv.URL, "koala"), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), sent...)
	}
}

func TestColumnSeriesAndByTask(t *testing.T) {
	ch, sent := compareFake(t, func(sql string) (int, string) {
		switch {
		case strings.Contains(sql, "count(), min(ts_ms)"):
			return 200, "6\t1704164645000\n"
		case strings.HasPrefix(sql, "SELECT task,"):
			return 200, "counter-0\t1704164645\t1500.5\ncounter-0\t1704164647\t900\ncounter-1\t1704164646\t70000\n"
		case strings.Contains(sql, "max(batch_time_max_us)"), strings.Contains(sql, "sum(bytes_transferred)"):
			return 200, "1704164645\t10\n1704164646\t25.5\n"
		}
		return 500, "unexpected " + sql
	})
	ctx := context.Background()

	pts, err := ch.ColumnSeries(ctx, "j", "counter", "bytes_transferred", AggSum)
	if err != nil || len(pts) != 2 || pts[0] != (Point{0, 10}) || pts[1] != (Point{1, 25.5}) {
		t.Fatalf("series %v %v", pts, err)
	}
	q := sent()[1]
	if !strings.Contains(q, "sum(bytes_transferred) FROM koala.task_metrics WHERE job = 'j' AND operator = 'counter' GROUP BY s") {
		t.Fatalf("sql %q", q)
	}
	if _, err := ch.ColumnSeries(ctx, "j", "", "batch_time_max_us", AggMax); err != nil {
		t.Fatal(err)
	}
	if q := sent()[3]; strings.Contains(q, "operator =") || !strings.Contains(q, "max(batch_time_max_us)") {
		t.Fatalf("all-operator sql %q", q)
	}

	byTask, err := ch.ColumnByTask(ctx, "j", "counter", "batch_time_max_us", AggMax)
	if err != nil {
		t.Fatal(err)
	}
	if len(byTask) != 2 || len(byTask["counter-0"]) != 2 || byTask["counter-0"][1] != (Point{2, 900}) || byTask["counter-1"][0] != (Point{1, 70000}) {
		t.Fatalf("by task %v", byTask)
	}
	if q := sent()[5]; !strings.Contains(q, "SELECT task, intDiv(ts_ms, 1000) AS s, max(batch_time_max_us)") || !strings.Contains(q, "GROUP BY task, s") {
		t.Fatalf("by-task sql %q", q)
	}
}

func TestColumnHelpersRejectBadInput(t *testing.T) {
	ch, sent := compareFake(t, func(string) (int, string) { return 200, "" })
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
	ch, sent := compareFake(t, func(sql string) (int, string) { return 200, "0\t0\n" })
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

func TestColumnHelpersServerError(t *testing.T) {
	ch, _ := compareFake(t, func(sql string) (int, string) {
		if strings.Contains(sql, "count(), min(ts_ms)") {
			return 200, "3\t1704164645000\n"
		}
		return 500, "Code: 47, DB::Exception: boom"
	})
	if _, err := ch.ColumnSeries(context.Background(), "j", "sink", "records_in", AggSum); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v", err)
	}
	if _, err := ch.ColumnByTask(context.Background(), "j", "sink", "records_in", AggSum); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err %v", err)
	}
}
