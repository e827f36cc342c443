package metrics

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clickHouseURL returns KOALA_CLICKHOUSE_URL or starts a throw-away
// clickhouse-server for the test, skipping if none is installed.
func clickHouseURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("KOALA_CLICKHOUSE_URL"); u != "" {
		return u
	}
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		for _, p := range []string{"/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"} {
			if _, err := os.Stat(p); err == nil {
				bin = p
				break
			}
		}
	}
	if bin == "" {
		t.Skip("clickhouse-server not installed and KOALA_CLICKHOUSE_URL not set")
	}
	dir := t.TempDir()
	httpPort, tcpPort := freePort(t), freePort(t)
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><console>1</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>%d</http_port>
  <tcp_port>%d</tcp_port>
  <path>%[3]s/data/</path>
  <tmp_path>%[3]s/tmp/</tmp_path>
  <user_files_path>%[3]s/user_files/</user_files_path>
  <format_schema_path>%[3]s/format_schemas/</format_schema_path>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
</yandex>
`, httpPort, tcpPort, dir)
	users := `<?xml version="1.0"?>
<yandex>
  <profiles><default></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`
	for name, body := range map[string]string{"config.xml": config, "users.xml": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "--config-file="+filepath.Join(dir, "config.xml"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by PID
		<-exited
	})

	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pingOK(base) {
			return base
		}
		select {
		case <-exited:
			t.Fatalf("clickhouse-server exited early:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("clickhouse-server not ready in 30s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

func pingOK(base string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/ping")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "Ok."
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestClickHouseIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	base := clickHouseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := fmt.Sprintf("koala_test_%d", time.Now().UnixNano())
	ch := NewClickHouse(base, db, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
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
	rows, err := ch.Query(ctx, "SELECT worker, count() FROM "+db+".task_metrics WHERE operator = 'sink' AND job != 'other' GROUP BY worker")
	if err != nil || len(rows) != 1 || rows[0][0] != "w\\1" || rows[0][1] != "10" {
		t.Fatalf("query %q %v", rows, err)
	}
	if _, err := ch.Query(ctx, "SELECT no_such_column FROM "+db+".task_metrics"); err == nil ||
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
	base := clickHouseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := fmt.Sprintf("koala_upgrade_%d", time.Now().UnixNano())
	ch := NewClickHouse(base, db, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(func() { _ = ch.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	const oldDefs = `ts DateTime, ts_ms UInt64, experiment String, job String, operator String, task String, worker String, ` +
		`records_in UInt64, records_out UInt64, batches UInt64, batch_time_avg_us Float64, batch_time_max_us Float64, ` +
		`queue_time_avg_us Float64, kafka_lag UInt64, idle_ratio Float64, backpressure_ratio Float64, ` +
		`multi_get_us Float64, multi_put_us Float64, key_lookup_us Float64, keys_per_batch Float64, ` +
		`bytes_transferred UInt64, keys_fetched UInt64, klt_size UInt64, klt_bytes UInt64`
	for _, s := range []string{
		"CREATE DATABASE " + db,
		"CREATE TABLE " + db + ".task_metrics (" + oldDefs + ") ENGINE = MergeTree() PARTITION BY toYYYYMMDD(ts) ORDER BY (job, ts)",
		"INSERT INTO " + db + ".task_metrics (ts, ts_ms, job, operator, task, records_in) VALUES (1700000000, 1700000000000, 'j', 'parse', 'parse-0', 7)",
	} {
		if err := ch.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
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
	rows, err := ch.Query(ctx, "SELECT count(), sum(records_in), sum(malformed_records), sum(oversize_records), sum(dead_lettered), sum(late_events) FROM "+
		db+".task_metrics WHERE job = 'j'")
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"4", "37", "6", "6", "12", "15"}}; fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("after upgrade: got %q, want %q", rows, want)
	}
	old, err := ch.Query(ctx, "SELECT malformed_records, dead_lettered, late_events FROM "+db+".task_metrics WHERE records_in = 7")
	if err != nil || fmt.Sprint(old) != "[[0 0 0]]" {
		t.Fatalf("old row reads %q %v, want zeros", old, err)
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
