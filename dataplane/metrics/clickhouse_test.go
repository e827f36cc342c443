package metrics

import (
	"context"
	"io"
	"koala/dataplane/dptest/testlog"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

type request struct{ query, body string }

// fakeCH is an httptest ClickHouse that records requests and answers with
// reply (default: 200, empty body).
type fakeCH struct {
	srv   *httptest.Server
	reqs  chan request
	mu    sync.Mutex
	reply func(r request) (int, string)
}

func newFake(t *testing.T) *fakeCH {
	t.Helper()
	f := &fakeCH{reqs: make(chan request, 100)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("method %s, want POST", r.Method)
		}
		b, _ := io.ReadAll(r.Body)
		req := request{query: r.URL.Query().Get("query"), body: string(b)}
		f.reqs <- req
		f.mu.Lock()
		reply := f.reply
		f.mu.Unlock()
		if reply != nil {
			code, body := reply(req)
			w.WriteHeader(code)
			io.WriteString(w, body)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeCH) setReply(fn func(r request) (int, string)) {
	f.mu.Lock()
	f.reply = fn
	f.mu.Unlock()
}

// next returns the next request, failing after a deadline.
func (f *fakeCH) next(t *testing.T) request {
	t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no request within 5s")
		return request{}
	}
}

func (f *fakeCH) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-f.reqs:
		t.Fatalf("unexpected request %+v", r)
	default:
	}
}

var t0 = time.Date(2024, 1, 2, 3, 4, 5, 678_000_000, time.UTC) // unix 1704164645

func TestInsertTaskRowExactFormat(t *testing.T) {
	f := newFake(t)
	ch := NewClickHouse(f.srv.URL, "", "koala")
	ch.RecordTask(TaskRow{
		Time: t0, Experiment: "exp\t1", Job: "job\n2", Operator: `op\3`, Task: "t0", Worker: "w",
		RecordsIn: 1, RecordsOut: 2, Batches: 3, BatchTimeAvgUs: 4.5, BatchTimeMaxUs: 1e6,
		QueueTimeAvgUs: 0.25, KafkaLag: 18446744073709551615, IdleRatio: 0.5, BackpressureRatio: 0,
		MultiGetUs: 7, MultiPutUs: 8, KeyLookupUs: 9, KeysPerBatch: 10.5,
		BytesTransferred: 11, KeysFetched: 12, KLTSize: 13, KLTBytes: 14,
		Malformed: 15, Oversize: 16, DeadLettered: 17, LateEvents: 18, BatchTimeHDR: "HISTx+/=",
	})
	if err := ch.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.next(t)
	wantQ := "INSERT INTO koala.task_metrics (ts, ts_ms, experiment, job, operator, task, worker, records_in, " +
		"records_out, batches, batch_time_avg_us, batch_time_max_us, queue_time_avg_us, kafka_lag, idle_ratio, " +
		"backpressure_ratio, multi_get_us, multi_put_us, key_lookup_us, keys_per_batch, bytes_transferred, " +
		"keys_fetched, klt_size, klt_bytes, malformed_records, oversize_records, dead_lettered, late_events, batch_time_hdr) FORMAT TabSeparated"
	if r.query != wantQ {
		t.Errorf("query\n got %q\nwant %q", r.query, wantQ)
	}
	wantB := "1704164645\t1704164645000\texp\\t1\tjob\\n2\top\\\\3\tt0\tw\t1\t2\t3\t4.5\t1e+06\t0.25\t" +
		"18446744073709551615\t0.5\t0\t7\t8\t9\t10.5\t11\t12\t13\t14\t15\t16\t17\t18\tHISTx+/=\n"
	if r.body != wantB {
		t.Errorf("body\n got %q\nwant %q", r.body, wantB)
	}
	f.none(t)
	// Nothing buffered: no insert.
	if err := ch.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.none(t)
}

func TestInsertReconfigExactFormat(t *testing.T) {
	f := newFake(t)
	ch := NewClickHouse(f.srv.URL+"/", "", "my-db")
	ch.RecordReconfig(ReconfigEvent{Time: t0, Experiment: "e", Job: "j", ReconfigID: "r1", Protocol: "koala",
		Step: "migrate", Phase: PhaseEnd, Millis: 12.5, Detail: "a\\b\r\x00"})
	if err := ch.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.next(t)
	wantQ := "INSERT INTO `my-db`.reconfig_events (ts, ts_ms, experiment, job, reconfig_id, protocol, step, phase, " +
		"millis, detail) FORMAT TabSeparated"
	if r.query != wantQ {
		t.Errorf("query\n got %q\nwant %q", r.query, wantQ)
	}
	wantB := "1704164645\t1704164645678\te\tj\tr1\tkoala\tmigrate\tend\t12.5\ta\\\\b\\r\\0\n"
	if r.body != wantB {
		t.Errorf("body\n got %q\nwant %q", r.body, wantB)
	}
}

func TestInsertCheckpointExactFormat(t *testing.T) {
	f := newFake(t)
	ch := NewClickHouse(f.srv.URL+"/", "", "my-db")
	ch.RecordCheckpoint(CheckpointRow{Time: t0, Experiment: "e", Job: "j", CheckpointID: "cp-000001", Kind: CheckpointKindCheckpoint,
		Millis: 21.5, Bytes: 4096, AlignMillis: 1.25, Tasks: 4, Detail: "x\ty"})
	if err := ch.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.next(t)
	wantQ := "INSERT INTO `my-db`.checkpoint_events (ts, ts_ms, experiment, job, checkpoint_id, kind, millis, bytes, " +
		"align_millis, tasks, detail) FORMAT TabSeparated"
	if r.query != wantQ {
		t.Errorf("query\n got %q\nwant %q", r.query, wantQ)
	}
	wantB := "1704164645\t1704164645678\te\tj\tcp-000001\tcheckpoint\t21.5\t4096\t1.25\t4\tx\\ty\n"
	if r.body != wantB {
		t.Errorf("body\n got %q\nwant %q", r.body, wantB)
	}
}

// TestEscapeRoundTrip sends awkward strings through the TabSeparated
// insert and reads them back over the native protocol, and checks that
// quoteString literals reach the server unchanged.
func TestEscapeRoundTrip(t *testing.T) {
	ch, _ := testClickHouse(t)
	ctx := context.Background()
	strs := []string{"", "plain", "a\tb", "a\nb", `a\b`, `\t literal`, "x\r\x00\b\f'y", `trailing\`}
	for i, s := range strs {
		e := escapeTSV(s)
		if strings.ContainsAny(e, "\t\n") {
			t.Errorf("escapeTSV(%q) = %q still has tab/newline", s, e)
		}
		ch.RecordReconfig(ReconfigEvent{Time: t0.Add(time.Duration(i) * time.Millisecond), Job: "esc", Detail: s})
	}
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	evs, err := ch.ReconfigEvents(ctx, "esc")
	if err != nil || len(evs) != len(strs) {
		t.Fatalf("events %+v %v", evs, err)
	}
	for i, s := range strs {
		if got := evs[i].Detail; got != s {
			t.Errorf("round trip %q -> %q -> %q", s, escapeTSV(s), got)
		}
	}
	if got := quoteString(`it's a\b`); got != `'it\'s a\\b'` {
		t.Errorf("quoteString: %q", got)
	}
	for _, s := range append(strs, `it's a\b`, `a'b\c\N`) {
		var got string
		if err := ch.selectOne(ctx, "SELECT "+quoteString(s), &got); err != nil || got != s {
			t.Errorf("SELECT %s = %q, %v; want %q", quoteString(s), got, err, s)
		}
	}
}

func TestFloatSpecials(t *testing.T) {
	var l tsvLine
	for _, v := range []float64{math.Inf(1), math.Inf(-1), math.NaN(), 0.1, 123456789} {
		l.f64(v)
	}
	if got, want := l.String(), "inf\t-inf\tnan\t0.1\t1.23456789e+08\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

// TestBackgroundFlushAtMostOncePerInterval drives the flusher with an injected
// ticker and clock: a tick less than one interval after the last insert must
// not insert; the rows go out with the next eligible tick.
func TestBackgroundFlushAtMostOncePerInterval(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	setNow := func(d time.Duration) { mu.Lock(); now = t0.Add(d); mu.Unlock() }
	ticks := make(chan time.Time) // unbuffered: a send returns once the loop took it
	ch := NewClickHouse(f.srv.URL, "", "koala", WithClock(clock), WithTicker(ticks))
	ctx := context.Background()
	ch.Start(ctx)

	for i := range 3 {
		ch.RecordTask(TaskRow{Time: t0, Job: "j", Task: string(rune('a' + i))})
	}
	ch.RecordReconfig(ReconfigEvent{Time: t0, Job: "j", Phase: PhaseStart})
	ticks <- now
	got := map[string]int{}
	for range 2 { // one insert per table, all buffered rows in it
		r := f.next(t)
		got[r.query[:strings.Index(r.query, " (")]] = strings.Count(r.body, "\n")
	}
	if got["INSERT INTO koala.task_metrics"] != 3 || got["INSERT INTO koala.reconfig_events"] != 1 {
		t.Fatalf("first flush: %v", got)
	}

	ch.RecordTask(TaskRow{Time: t0, Job: "j", Task: "d"})
	setNow(500 * time.Millisecond)
	ticks <- now // too early: no insert
	ch.RecordTask(TaskRow{Time: t0, Job: "j", Task: "e"})
	setNow(1000 * time.Millisecond)
	ticks <- now // the loop finished the previous tick before taking this one
	r := f.next(t)
	if !strings.Contains(r.query, "task_metrics") || strings.Count(r.body, "\n") != 2 {
		t.Fatalf("second flush: %q %q", r.query, r.body)
	}
	f.none(t) // reconfig table had nothing new

	ch.RecordTask(TaskRow{Time: t0, Job: "j", Task: "f"})
	if err := ch.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.next(t); strings.Count(r.body, "\n") != 1 {
		t.Fatalf("close flush body %q", r.body)
	}
	if ch.Pending() != 0 {
		t.Fatalf("pending %d after close", ch.Pending())
	}
}

func TestInsertErrorKeptAndRetried(t *testing.T) {
	f := newFake(t)
	f.setReply(func(request) (int, string) {
		return 500, "Code: 60, e.displayText() = DB::Exception: Table koala.task_metrics doesn't exist"
	})
	var logBuf testlog.Buffer
	ch := NewClickHouse(f.srv.URL, "", "koala", WithLogger(slog.New(slog.NewTextHandler(&logBuf, nil))))
	ctx := context.Background()
	ch.RecordTask(TaskRow{Time: t0, Task: "1"})
	err := ch.Flush(ctx)
	if err == nil || !strings.Contains(err.Error(), "doesn't exist") {
		t.Fatalf("flush error %v", err)
	}
	f.next(t)
	if ch.InsertErrors() != 1 || ch.Err() == nil || !strings.Contains(ch.Err().Error(), "HTTP 500") {
		t.Fatalf("errors=%d err=%v", ch.InsertErrors(), ch.Err())
	}
	if l := logBuf.String(); !strings.Contains(l, "insert failed") || !strings.Contains(l, "doesn't exist") {
		t.Fatalf("log %q", l)
	}
	ch.RecordTask(TaskRow{Time: t0, Task: "2"})
	f.setReply(nil)
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r := f.next(t)
	lines := strings.Split(strings.TrimSuffix(r.body, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "\t1\t") || !strings.Contains(lines[1], "\t2\t") {
		t.Fatalf("retry body %q", r.body)
	}
	if ch.Pending() != 0 || ch.Dropped() != 0 {
		t.Fatalf("pending=%d dropped=%d", ch.Pending(), ch.Dropped())
	}
}

func TestBufferBoundDropsOldest(t *testing.T) {
	f := newFake(t)
	f.setReply(func(request) (int, string) { return 503, "overloaded" })
	ch := NewClickHouse(f.srv.URL, "", "koala", WithMaxBuffered(3))
	ctx := context.Background()
	for i := range 5 {
		ch.RecordTask(TaskRow{Time: t0, Task: string(rune('a' + i))})
	}
	if ch.Dropped() != 2 || ch.Pending() != 3 {
		t.Fatalf("dropped=%d pending=%d", ch.Dropped(), ch.Pending())
	}
	_ = ch.Flush(ctx) // fails, rows come back
	f.next(t)
	ch.RecordTask(TaskRow{Time: t0, Task: "f"})
	if ch.Dropped() != 3 {
		t.Fatalf("dropped=%d", ch.Dropped())
	}
	f.setReply(nil)
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var tasks []string
	for _, l := range strings.Split(strings.TrimSuffix(f.next(t).body, "\n"), "\n") {
		tasks = append(tasks, strings.Split(l, "\t")[5])
	}
	if strings.Join(tasks, "") != "def" {
		t.Fatalf("kept tasks %v, want d e f", tasks)
	}
}

// TestReadHelpers reads series and events back from a real server.
func TestReadHelpers(t *testing.T) {
	var sent []string
	ch, db := testClickHouse(t)
	ch.traceSQL = func(sql string) { sent = append(sent, sql) }
	ctx := context.Background()
	base := time.UnixMilli(1704164645000)
	for _, r := range []TaskRow{
		{Time: base, Job: "j", Operator: "sink", Task: "a", RecordsIn: 10},
		{Time: base.Add(1500 * time.Millisecond), Job: "j", Operator: "sink", Task: "a", RecordsIn: 20},
		{Time: base.Add(1100 * time.Millisecond), Job: "j", Operator: "sink", Task: "b", RecordsIn: 5},
		{Time: base.Add(1200 * time.Millisecond), Job: "j", Operator: "source", Task: "s", RecordsIn: 1000},
	} {
		ch.RecordTask(r)
	}
	ch.RecordReconfig(ReconfigEvent{Time: time.UnixMilli(1704164646500), Experiment: "e", Job: "j", ReconfigID: "r1",
		Protocol: "koala", Phase: PhaseStart, Detail: "x\ty"})
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	if err := ch.selectRows(ctx, "SELECT bad", func(driver.Rows) error { return nil }); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Fatalf("error %v lacks server message", err)
	}

	sent = nil
	pts, err := ch.Throughput(ctx, "j", "sink")
	if err != nil || len(pts) != 2 || pts[0] != (Point{0, 10}) || pts[1] != (Point{1, 25}) {
		t.Fatalf("throughput %v %v", pts, err)
	}
	if len(sent) != 2 || !strings.Contains(sent[1], "FROM "+db+".task_metrics WHERE job = 'j' AND operator = 'sink'") {
		t.Fatalf("throughput sql %q", sent)
	}
	byTask, err := ch.ThroughputByTask(ctx, "j", "sink")
	if err != nil || len(byTask["a"]) != 2 || byTask["b"][0] != (Point{1, 5}) {
		t.Fatalf("by task %v %v", byTask, err)
	}
	evs, err := ch.ReconfigEvents(ctx, "j")
	if err != nil || len(evs) != 1 || evs[0].Detail != "x\ty" || !evs[0].Time.Equal(time.UnixMilli(1704164646500)) ||
		evs[0].Experiment != "e" || evs[0].ReconfigID != "r1" || evs[0].Phase != PhaseStart {
		t.Fatalf("events %+v %v", evs, err)
	}
}

func TestMemoryAndNop(t *testing.T) {
	m := NewMemory()
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.RecordTask(TaskRow{RecordsIn: uint64(i)})
			m.RecordReconfig(ReconfigEvent{Step: "s"})
		}()
	}
	wg.Wait()
	tasks := m.Tasks()
	if len(tasks) != 10 || len(m.Reconfigs()) != 10 {
		t.Fatalf("got %d/%d", len(tasks), len(m.Reconfigs()))
	}
	tasks[0].Job = "mutated"
	if m.Tasks()[0].Job == "mutated" {
		t.Fatal("Tasks did not return a copy")
	}
	m.Reset()
	if len(m.Tasks()) != 0 {
		t.Fatal("reset")
	}
	var r Recorder = Nop{}
	r.RecordTask(TaskRow{})
	r.RecordReconfig(ReconfigEvent{})
}
