package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultMaxBuffered is the default bound on buffered rows per table.
const DefaultMaxBuffered = 200_000

// ClickHouse is a Recorder that buffers rows in memory and inserts them over
// ClickHouse's HTTP interface (INSERT ... FORMAT TabSeparated, see
// insert_http.go), at most once per flush interval (default one second) per
// table. It also creates the tables and runs the typed read queries, over
// the native protocol (native.go). Credentials may be given in the base URL
// (http://user:pw@host:8123); the native connection logs in with the same.
//
// Failed inserts are counted (InsertErrors, Err), logged, and retried on the
// next flush; when a table's buffer exceeds its bound the oldest rows are
// dropped and counted (Dropped).
type ClickHouse struct {
	base       *url.URL
	baseErr    error
	nativeAddr string
	db         string
	client     *http.Client
	log        *slog.Logger
	interval   time.Duration
	now        func() time.Time
	ticks      <-chan time.Time
	maxBuf     int

	mu      sync.Mutex
	tables  [3]*tableBuf // task rows, reconfiguration events, checkpoint rows
	dropped uint64
	errs    uint64
	lastErr error

	flushMu sync.Mutex // serialises flushes so retried rows keep their order

	loopMu sync.Mutex
	stop   chan struct{}
	done   chan struct{}

	connMu sync.Mutex
	conn   driver.Conn // native connection, opened on the first DDL or SELECT

	traceSQL func(sql string) // tests: sees every statement sent over the native protocol
}

// tableBuf is the pending rows of one table (guarded by ClickHouse.mu).
type tableBuf struct {
	name, columns string
	lines         []string
	lastInsert    time.Time
	droppedLogged uint64
	dropped       uint64
}

// Option configures a ClickHouse.
type Option func(*ClickHouse)

// WithHTTPClient sets the HTTP client (default: 30 s timeout).
func WithHTTPClient(c *http.Client) Option { return func(ch *ClickHouse) { ch.client = c } }

// WithLogger sets the logger for insert errors and drops (default: discard).
func WithLogger(l *slog.Logger) Option { return func(ch *ClickHouse) { ch.log = l } }

// WithFlushInterval sets the minimum time between two inserts into one table
// by the background flusher (default 1 s).
func WithFlushInterval(d time.Duration) Option { return func(ch *ClickHouse) { ch.interval = d } }

// WithMaxBuffered bounds the rows buffered per table (default DefaultMaxBuffered).
func WithMaxBuffered(n int) Option { return func(ch *ClickHouse) { ch.maxBuf = n } }

// WithClock replaces time.Now (used to stamp rows without a time and to
// enforce the flush interval).
func WithClock(now func() time.Time) Option { return func(ch *ClickHouse) { ch.now = now } }

// WithTicker makes the background flusher wake up on c instead of a
// time.Ticker of the flush interval (for tests).
func WithTicker(c <-chan time.Time) Option { return func(ch *ClickHouse) { ch.ticks = c } }

// NewClickHouse returns a client storing into database that inserts over the
// HTTP interface at baseURL (e.g. "http://127.0.0.1:8123") and runs DDL and
// SELECTs over the native interface at nativeAddr (host:port, e.g.
// "127.0.0.1:9000"). The native connection is opened on the first DDL or
// SELECT, so nativeAddr may be "" where nothing is read or created (a bad
// address is reported then; CheckNativeAddr checks one up front). Call
// EnsureSchema once and Start to run the background flusher; Close flushes
// what is left.
func NewClickHouse(baseURL, nativeAddr, database string, opts ...Option) *ClickHouse {
	ch := &ClickHouse{
		nativeAddr: nativeAddr,
		db:         database,
		client:     &http.Client{Timeout: 30 * time.Second},
		log:        slog.New(slog.DiscardHandler),
		interval:   time.Second,
		now:        time.Now,
		maxBuf:     DefaultMaxBuffered,
	}
	ch.base, ch.baseErr = url.Parse(strings.TrimSuffix(baseURL, "/") + "/")
	if ch.baseErr == nil && (ch.base.Scheme == "" || ch.base.Host == "") {
		ch.baseErr = fmt.Errorf("metrics: clickhouse URL %q needs scheme and host", baseURL)
	}
	for _, o := range opts {
		o(ch)
	}
	if ch.maxBuf <= 0 {
		ch.maxBuf = DefaultMaxBuffered
	}
	ch.tables[0] = &tableBuf{name: TaskTable, columns: columnNames(taskColumnDefs)}
	ch.tables[1] = &tableBuf{name: ReconfigTable, columns: columnNames(reconfigColumnDefs)}
	ch.tables[2] = &tableBuf{name: CheckpointTable, columns: columnNames(checkpointColumnDefs)}
	return ch
}

// table returns the qualified name of a table in the database.
func (ch *ClickHouse) table(name string) string { return ident(ch.db) + "." + name }

// EnsureSchema creates the database and the tables if they do not exist
// and adds the task_metrics columns an older table lacks (over the native
// protocol).
func (ch *ClickHouse) EnsureSchema(ctx context.Context) error {
	stmts := []string{
		"CREATE DATABASE IF NOT EXISTS " + ident(ch.db),
		"CREATE TABLE IF NOT EXISTS " + ch.table(TaskTable) + " (" + taskColumnDefs + ") " +
			"ENGINE = MergeTree() PARTITION BY toYYYYMMDD(ts) ORDER BY (job, ts)",
		"CREATE TABLE IF NOT EXISTS " + ch.table(ReconfigTable) + " (" + reconfigColumnDefs + ") " +
			"ENGINE = MergeTree() PARTITION BY toYYYYMMDD(ts) ORDER BY (job, ts)",
		"CREATE TABLE IF NOT EXISTS " + ch.table(CheckpointTable) + " (" + checkpointColumnDefs + ") " +
			"ENGINE = MergeTree() PARTITION BY toYYYYMMDD(ts) ORDER BY (job, ts)",
	}
	for _, s := range stmts {
		if err := ch.Exec(ctx, s); err != nil {
			return err
		}
	}
	return ch.addMissingColumns(ctx, TaskTable, badRecordColumnDefs+", "+batchHistColumnDefs)
}

// addMissingColumns adds the columns of defs that table lacks: tables
// created by an older release get the columns added since (old rows read
// 0). ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS, so the existing
// columns are looked up first; a concurrent EnsureSchema that added a
// column in between is recognised by looking again.
func (ch *ClickHouse) addMissingColumns(ctx context.Context, table, defs string) error {
	have, err := ch.columns(ctx, table)
	if err != nil {
		return err
	}
	for _, def := range strings.Split(defs, ", ") {
		name, _, _ := strings.Cut(def, " ")
		if have[name] {
			continue
		}
		err := ch.Exec(ctx, "ALTER TABLE "+ch.table(table)+" ADD COLUMN "+def)
		if err == nil {
			continue
		}
		if now, cerr := ch.columns(ctx, table); cerr == nil && now[name] {
			continue
		}
		return fmt.Errorf("metrics: add column %s to %s: %w", name, table, err)
	}
	return nil
}

// columns lists the column names of a table of the database.
func (ch *ClickHouse) columns(ctx context.Context, table string) (map[string]bool, error) {
	out := make(map[string]bool)
	err := ch.selectRows(ctx, "SELECT name FROM system.columns WHERE database = "+quoteString(ch.db)+" AND table = "+quoteString(table),
		func(r driver.Rows) error {
			var name string
			if err := r.Scan(&name); err != nil {
				return err
			}
			out[name] = true
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("metrics: columns of %s: %w", table, err)
	}
	return out, nil
}

// RecordTask implements Recorder. A zero Time is replaced by the clock.
func (ch *ClickHouse) RecordTask(r TaskRow) {
	if r.Time.IsZero() {
		r.Time = ch.now()
	}
	ch.add(ch.tables[0], encodeTask(r))
}

// RecordReconfig implements Recorder. A zero Time is replaced by the clock.
func (ch *ClickHouse) RecordReconfig(e ReconfigEvent) {
	if e.Time.IsZero() {
		e.Time = ch.now()
	}
	ch.add(ch.tables[1], encodeReconfig(e))
}

// RecordCheckpoint implements CheckpointRecorder. A zero Time is replaced by the clock.
func (ch *ClickHouse) RecordCheckpoint(r CheckpointRow) {
	if r.Time.IsZero() {
		r.Time = ch.now()
	}
	ch.add(ch.tables[2], encodeCheckpoint(r))
}

func (ch *ClickHouse) add(t *tableBuf, line string) {
	ch.mu.Lock()
	t.lines = append(t.lines, line)
	ch.trimLocked(t)
	ch.mu.Unlock()
}

// trimLocked drops the oldest rows of t beyond the bound.
func (ch *ClickHouse) trimLocked(t *tableBuf) {
	if over := len(t.lines) - ch.maxBuf; over > 0 {
		clear(t.lines[:over])
		t.lines = t.lines[over:]
		t.dropped += uint64(over)
		ch.dropped += uint64(over)
	}
}

// Dropped returns how many rows were discarded because a buffer was full.
func (ch *ClickHouse) Dropped() uint64 {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.dropped
}

// InsertErrors returns how many inserts failed.
func (ch *ClickHouse) InsertErrors() uint64 {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.errs
}

// Err returns the last insert error, or nil if there was none.
func (ch *ClickHouse) Err() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.lastErr
}

// Pending returns the number of buffered rows not yet inserted.
func (ch *ClickHouse) Pending() int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := 0
	for _, t := range ch.tables {
		n += len(t.lines)
	}
	return n
}

// Flush inserts everything buffered now, regardless of the flush interval.
// Rows of a failed insert stay buffered for the next flush.
func (ch *ClickHouse) Flush(ctx context.Context) error { return ch.flush(ctx, true) }

func (ch *ClickHouse) flush(ctx context.Context, force bool) error {
	ch.flushMu.Lock()
	defer ch.flushMu.Unlock()
	var errs []error
	for _, t := range ch.tables {
		if err := ch.flushTable(ctx, t, force); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (ch *ClickHouse) flushTable(ctx context.Context, t *tableBuf, force bool) error {
	ch.mu.Lock()
	now := ch.now()
	if len(t.lines) == 0 || (!force && now.Sub(t.lastInsert) < ch.interval) {
		ch.mu.Unlock()
		return nil
	}
	lines := t.lines
	t.lines = nil
	t.lastInsert = now
	newDrops, totalDrops := t.dropped-t.droppedLogged, t.dropped
	t.droppedLogged = t.dropped
	ch.mu.Unlock()
	if newDrops > 0 {
		ch.log.Warn("clickhouse metrics buffer full, dropped oldest rows",
			"table", t.name, "dropped", newDrops, "dropped_total", totalDrops)
	}

	err := ch.insertHTTP(ctx, t.name, t.columns, lines)
	if err == nil {
		return nil
	}
	ch.mu.Lock()
	ch.errs++
	ch.lastErr = err
	t.lines = append(lines, t.lines...)
	ch.trimLocked(t)
	pending := len(t.lines)
	ch.mu.Unlock()
	ch.log.Error("clickhouse metrics insert failed, will retry",
		"table", t.name, "rows", len(lines), "pending", pending, "err", err)
	return err
}

// Start runs the background flusher until ctx is done or Close is called.
// Calling Start while the flusher runs has no effect.
func (ch *ClickHouse) Start(ctx context.Context) {
	ch.loopMu.Lock()
	defer ch.loopMu.Unlock()
	if ch.stop != nil {
		return
	}
	stopCh, done := make(chan struct{}), make(chan struct{})
	ch.stop, ch.done = stopCh, done
	ticks := ch.ticks
	var stopTicker func()
	if ticks == nil {
		tk := time.NewTicker(ch.interval)
		ticks, stopTicker = tk.C, tk.Stop
	}
	go func() {
		defer close(done)
		if stopTicker != nil {
			defer stopTicker()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopCh:
				return
			case <-ticks:
				_ = ch.flush(ctx, false) // counted, kept and logged by flushTable
			}
		}
	}()
}

// Close stops the background flusher, flushes the remaining rows and
// closes the native connection if one was opened.
func (ch *ClickHouse) Close(ctx context.Context) error {
	ch.loopMu.Lock()
	if ch.stop != nil {
		close(ch.stop)
		<-ch.done
		ch.stop = nil
	}
	ch.loopMu.Unlock()
	return errors.Join(ch.Flush(ctx), ch.closeNative())
}
