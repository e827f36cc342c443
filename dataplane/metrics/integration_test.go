package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

func TestClickHouseIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	base, native := clickHouseAddrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := fmt.Sprintf("koala_test_%d", time.Now().UnixNano())
	ch := NewClickHouse(base, native, db, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err := ch.EnsureSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ch.EnsureSchema(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	ch.Start(ctx)

	start := time.Unix(1_700_000_000, 0)
	for sec := range 5 {
		for task := range 2 {
			ch.RecordTask(TaskRow{
				Time: start.Add(time.Duration(sec)*time.Second + 300*time.Millisecond), Experiment: "it",
				Job: "job\t1", Operator: "sink", Task: fmt.Sprintf("sink-%d", task), Worker: "w\\1",
				RecordsIn: uint64(100*(sec+1) + task), BatchTimeAvgUs: 1.5,
			})
		}
		ch.RecordTask(TaskRow{Time: start.Add(time.Duration(sec) * time.Second), Job: "job\t1",
			Operator: "source", Task: "source-0", KafkaLag: uint64(50 - sec)})
	}
	ch.RecordTask(TaskRow{Time: start, Job: "other", Operator: "sink", RecordsIn: 9999})
	ch.RecordReconfig(ReconfigEvent{Time: start.Add(2100 * time.Millisecond), Job: "job\t1", ReconfigID: "r1",
		Protocol: "koala", Phase: PhaseStart, Detail: "line1\nline2 'quoted'"})
	ch.RecordReconfig(ReconfigEvent{Time: start.Add(3250 * time.Millisecond), Job: "job\t1", ReconfigID: "r1",
		Protocol: "koala", Phase: PhaseEnd, Millis: 1150})
	ch.RecordCheckpoint(CheckpointRow{Time: start.Add(4 * time.Second), Job: "job\t1", CheckpointID: "cp-000001",
		Kind: CheckpointKindCheckpoint, Millis: 21.5, Bytes: 1 << 20, AlignMillis: 3.25, Tasks: 4})
	ch.RecordCheckpoint(CheckpointRow{Time: start.Add(4500 * time.Millisecond), Job: "job\t1", CheckpointID: "cp-000001",
		Kind: CheckpointKindRecovery, Millis: 400, Tasks: 4, Detail: "lost w2"})
	if err := ch.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ch.Err() != nil || ch.Dropped() != 0 {
		t.Fatalf("err=%v dropped=%d", ch.Err(), ch.Dropped())
	}

	pts, err := ch.Throughput(ctx, "job\t1", "sink")
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 5 {
		t.Fatalf("throughput %v", pts)
	}
	for i, p := range pts {
		if want := (Point{Sec: float64(i), Value: float64(200*(i+1) + 1)}); p != want {
			t.Errorf("point %d = %v, want %v", i, p, want)
		}
	}
	byTask, err := ch.ThroughputByTask(ctx, "job\t1", "sink")
	if err != nil || len(byTask) != 2 || byTask["sink-1"][4] != (Point{4, 501}) {
		t.Fatalf("by task %v %v", byTask, err)
	}
	lag, err := ch.Lag(ctx, "job\t1")
	if err != nil || len(lag) != 5 || lag[0] != (Point{0, 50}) || lag[4] != (Point{4, 46}) {
		t.Fatalf("lag %v %v", lag, err)
	}
	evs, err := ch.ReconfigEvents(ctx, "job\t1")
	if err != nil || len(evs) != 2 {
		t.Fatalf("events %+v %v", evs, err)
	}
	if evs[0].Detail != "line1\nline2 'quoted'" || !evs[0].Time.Equal(start.Add(2100*time.Millisecond)) ||
		evs[1].Phase != PhaseEnd || evs[1].Millis != 1150 {
		t.Fatalf("events %+v", evs)
	}
	cps, err := ch.CheckpointRows(ctx, "job\t1")
	if err != nil || len(cps) != 2 {
		t.Fatalf("checkpoint rows %+v %v", cps, err)
	}
	if cps[0].Kind != CheckpointKindCheckpoint || cps[0].Bytes != 1<<20 || cps[0].AlignMillis != 3.25 || cps[0].Tasks != 4 ||
		cps[1].Kind != CheckpointKindRecovery || cps[1].Millis != 400 || cps[1].Detail != "lost w2" || !cps[1].Time.Equal(start.Add(4500*time.Millisecond)) {
		t.Fatalf("checkpoint rows %+v", cps)
	}
	if js, err := ch.JobStart(ctx, "job\t1"); err != nil || !js.Equal(start) {
		t.Fatalf("job start %v %v", js, err)
	}
	if pts, err := ch.Throughput(ctx, "missing", "sink"); err != nil || pts != nil {
		t.Fatalf("missing job: %v %v", pts, err)
	}
	var workers []string
	var counts []uint64
	err = ch.selectRows(ctx, "SELECT worker, toUInt64(count()) FROM "+db+".task_metrics WHERE operator = 'sink' AND job != 'other' GROUP BY worker",
		func(r driver.Rows) error {
			var w string
			var n uint64
			err := r.Scan(&w, &n)
			workers, counts = append(workers, w), append(counts, n)
			return err
		})
	if err != nil || len(workers) != 1 || workers[0] != "w\\1" || counts[0] != 10 {
		t.Fatalf("query %q %v %v", workers, counts, err)
	}
	if err := ch.selectRows(ctx, "SELECT no_such_column FROM "+db+".task_metrics", func(driver.Rows) error { return nil }); err == nil ||
		!strings.Contains(err.Error(), "no_such_column") {
		t.Fatalf("want error with server message, got %v", err)
	}
}

// TestClickHouseSchemaUpgrade creates task_metrics as the first release
// did, then lets EnsureSchema add the bad-record columns: old rows keep
// their values and read 0 in the new columns, new rows carry them.
func TestClickHouseSchemaUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	base, native := clickHouseAddrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := fmt.Sprintf("koala_upgrade_%d", time.Now().UnixNano())
	ch := NewClickHouse(base, native, db, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(func() { _ = ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	const oldDefs = `ts DateTime, ts_ms UInt64, experiment String, job String, operator String, task String, worker String, ` +
		`records_in UInt64, records_out UInt64, batches UInt64, batch_time_avg_us Float64, batch_time_max_us Float64, ` +
		`queue_time_avg_us Float64, kafka_lag UInt64, idle_ratio Float64, backpressure_ratio Float64, ` +
		`multi_get_us Float64, multi_put_us Float64, key_lookup_us Float64, keys_per_batch Float64, ` +
		`bytes_transferred UInt64, keys_fetched UInt64, klt_size UInt64, klt_bytes UInt64`
	for _, s := range []string{
		"CREATE DATABASE " + db,
		"CREATE TABLE " + db + ".task_metrics (" + oldDefs + ") ENGINE = MergeTree() PARTITION BY toYYYYMMDD(ts) ORDER BY (job, ts)",
	} {
		if err := ch.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// Inserts go over HTTP, as the flusher's do (insert_http.go).
	if err := ch.insertHTTP(ctx, TaskTable, "ts, ts_ms, job, operator, task, records_in",
		[]string{"1700000000\t1700000000000\tj\tparse\tparse-0\t7\n"}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent on an upgraded table
		if err := ch.EnsureSchema(ctx); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Unix(1_700_000_001, 0)
	var bh BatchHist
	for sec := range 3 {
		bh.Observe(time.Duration(sec+1) * time.Millisecond)
		hist, err := bh.Take()
		if err != nil {
			t.Fatal(err)
		}
		ch.RecordTask(TaskRow{Time: start.Add(time.Duration(sec) * time.Second), Job: "j", Operator: "parse", Task: "parse-0",
			RecordsIn: 10, Malformed: uint64(sec + 1), Oversize: 2, DeadLettered: uint64(sec + 3), LateEvents: 5, BatchTimeHDR: hist})
	}
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// count() and sums of UInt64 columns are UInt64 on 18.16 and current servers.
	var sums [6]uint64
	err := ch.selectOne(ctx, "SELECT count(), sum(records_in), sum(malformed_records), sum(oversize_records), sum(dead_lettered), sum(late_events) FROM "+
		db+".task_metrics WHERE job = 'j'", &sums[0], &sums[1], &sums[2], &sums[3], &sums[4], &sums[5])
	if err != nil {
		t.Fatal(err)
	}
	if want := [6]uint64{4, 37, 6, 6, 12, 15}; sums != want {
		t.Fatalf("after upgrade: got %v, want %v", sums, want)
	}
	var old [3]uint64
	err = ch.selectOne(ctx, "SELECT malformed_records, dead_lettered, late_events FROM "+db+".task_metrics WHERE records_in = 7", &old[0], &old[1], &old[2])
	if err != nil || old != [3]uint64{} {
		t.Fatalf("old row reads %v %v, want zeros", old, err)
	}
	pts, err := ch.ColumnSeries(ctx, "j", "parse", "dead_lettered", AggSum)
	if err != nil || len(pts) != 4 || pts[3].Value != 5 {
		t.Fatalf("dead_lettered series %v %v", pts, err)
	}
	// The batch-time histograms come back decodable; the old row has none.
	hs, err := ch.BatchHists(ctx, "j", "parse")
	if err != nil || len(hs) != 3 || hs[0].Sec != 1 || hs[2].Sec != 3 {
		t.Fatalf("batch histograms %+v %v", hs, err)
	}
	p, ok, err := BatchHistWindow(hs, 2, 4) // seconds 2 and 3: the 2 ms and 3 ms batches
	if err != nil || !ok || p.Count != 2 || p.P50Us < 1999 || p.P50Us > 2001 || p.MaxUs < 2999 || p.MaxUs > 3002 {
		t.Fatalf("window percentiles %+v %v %v", p, ok, err)
	}
}
