package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// AutoscaleTable holds the autoscaler's decisions: one AutoscaleRow per
// operator of every decision that changed or held back a parallelism.
const AutoscaleTable = "autoscale_decisions"

// autoscaleColumnDefs are the columns of AutoscaleTable, in insert order.
const autoscaleColumnDefs = `ts DateTime, ts_ms UInt64, job String, autoscaler String, seq UInt64, operator String, action String, ` +
	`from_parallelism UInt64, to_parallelism UInt64, target UInt64, raw_target Float64, true_rate Float64, input_rate Float64, ` +
	`observed_rate Float64, arrival_rate Float64, kafka_lag Float64, utilization Float64, window_from_ms UInt64, outcome String, detail String`

// AutoscaleRow is one operator's part of one autoscaler decision: the
// inputs (rates and lag over the metrics window), DS2's target and what
// was done about it.
type AutoscaleRow struct {
	Time       time.Time // end of the metrics window the decision was made from
	WindowFrom time.Time
	Job        string
	Autoscaler string // the Autoscale workflow's id
	Seq        uint64 // the autoscaler's tick
	Operator   string
	// Action: "scale-out", "scale-in", "hold" or "none" (the target is
	// the current parallelism, or the operator is not autoscaled).
	Action                string
	From, To, Target      uint64
	RawTarget             float64
	TrueRate, InputRate   float64 // records per busy second per task; rate to absorb
	ObservedRate, Arrival float64 // measured input; records arriving in Kafka (sources)
	KafkaLag, Utilization float64
	Outcome, Detail       string // the reconfiguration's outcome; the summary or hold reason
}

// AutoscaleLog stores AutoscaleRows in ClickHouse; it creates the table
// on first use (over the native protocol) and inserts each decision at
// once over HTTP (decisions are rare).
type AutoscaleLog struct {
	ch    *ClickHouse
	mu    sync.Mutex
	ready bool
}

// NewAutoscaleLog returns a log over ch's database.
func NewAutoscaleLog(ch *ClickHouse) *AutoscaleLog { return &AutoscaleLog{ch: ch} }

// ensure creates the table once.
func (l *AutoscaleLog) ensure(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ready {
		return nil
	}
	if err := l.ch.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+l.ch.table(AutoscaleTable)+" ("+autoscaleColumnDefs+") "+
		"ENGINE = MergeTree() PARTITION BY toYYYYMMDD(ts) ORDER BY (job, ts)"); err != nil {
		return err
	}
	l.ready = true
	return nil
}

// Record inserts rows.
func (l *AutoscaleLog) Record(ctx context.Context, rows []AutoscaleRow) error {
	if len(rows) == 0 {
		return nil
	}
	if err := l.ensure(ctx); err != nil {
		return fmt.Errorf("metrics: table %s: %w", AutoscaleTable, err)
	}
	lines := make([]string, 0, len(rows))
	for _, r := range rows {
		lines = append(lines, encodeAutoscale(r))
	}
	return l.ch.insertHTTP(ctx, AutoscaleTable, columnNames(autoscaleColumnDefs), lines)
}

func encodeAutoscale(r AutoscaleRow) string {
	var l tsvLine
	l.ts(r.Time)
	l.str(r.Job)
	l.str(r.Autoscaler)
	l.u64(r.Seq)
	l.str(r.Operator)
	l.str(r.Action)
	l.u64(r.From)
	l.u64(r.To)
	l.u64(r.Target)
	l.f64(r.RawTarget)
	l.f64(r.TrueRate)
	l.f64(r.InputRate)
	l.f64(r.ObservedRate)
	l.f64(r.Arrival)
	l.f64(r.KafkaLag)
	l.f64(r.Utilization)
	l.u64(uint64(max(r.WindowFrom.UnixMilli(), 0)))
	l.str(r.Outcome)
	l.str(r.Detail)
	return l.String()
}

// Rows returns the job's decision rows ordered by time, tick and operator.
func (l *AutoscaleLog) Rows(ctx context.Context, job string) ([]AutoscaleRow, error) {
	if err := l.ensure(ctx); err != nil {
		return nil, fmt.Errorf("metrics: table %s: %w", AutoscaleTable, err)
	}
	out := []AutoscaleRow{}
	err := l.ch.selectRows(ctx, "SELECT ts_ms, window_from_ms, job, autoscaler, seq, operator, action, from_parallelism, to_parallelism, target, raw_target, "+
		"true_rate, input_rate, observed_rate, arrival_rate, kafka_lag, utilization, outcome, detail FROM "+l.ch.table(AutoscaleTable)+
		" WHERE job = "+quoteString(job)+" ORDER BY ts_ms, seq, operator",
		func(rs driver.Rows) error {
			var ms, fromMs uint64
			var r AutoscaleRow
			if err := rs.Scan(&ms, &fromMs, &r.Job, &r.Autoscaler, &r.Seq, &r.Operator, &r.Action, &r.From, &r.To, &r.Target, &r.RawTarget,
				&r.TrueRate, &r.InputRate, &r.ObservedRate, &r.Arrival, &r.KafkaLag, &r.Utilization, &r.Outcome, &r.Detail); err != nil {
				return err
			}
			r.Time, r.WindowFrom = time.UnixMilli(int64(ms)), time.UnixMilli(int64(fromMs))
			out = append(out, r)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("metrics: autoscale decisions of %q: %w", job, err)
	}
	return out, nil
}
