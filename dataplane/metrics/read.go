package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// ErrNoData is returned by JobStart when the job has no metric rows.
var ErrNoData = errors.New("metrics: no metric rows for job")

// JobStart returns the time of the job's first metric row (min ts_ms in
// task_metrics), the zero of all series of that job. It returns ErrNoData if
// the job has no rows.
func (ch *ClickHouse) JobStart(ctx context.Context, job string) (time.Time, error) {
	ms, err := ch.jobStartMs(ctx, job)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(int64(ms)), nil
}

func (ch *ClickHouse) jobStartMs(ctx context.Context, job string) (uint64, error) {
	n, ms, err := ch.jobRows(ctx, job)
	if err != nil {
		return 0, fmt.Errorf("metrics: job start of %q: %w", job, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%w %q", ErrNoData, job)
	}
	return ms, nil
}

// TaskRowCount is the number of task metric rows of the job.
func (ch *ClickHouse) TaskRowCount(ctx context.Context, job string) (uint64, error) {
	n, _, err := ch.jobRows(ctx, job)
	if err != nil {
		return 0, fmt.Errorf("metrics: task rows of %q: %w", job, err)
	}
	return n, nil
}

func (ch *ClickHouse) jobRows(ctx context.Context, job string) (n, minMs uint64, err error) {
	err = ch.selectOne(ctx, "SELECT toUInt64(count()), toUInt64(min(ts_ms)) FROM "+ch.table(TaskTable)+
		" WHERE job = "+quoteString(job), &n, &minMs)
	return n, minMs, err
}

// Throughput returns the per-second sum of records_in over the operator's
// tasks. Seconds in which no task of the operator reported are absent.
func (ch *ClickHouse) Throughput(ctx context.Context, job, operator string) ([]Point, error) {
	return ch.series(ctx, job, "records_in", "operator = "+quoteString(operator))
}

// Lag returns the per-second sum of kafka_lag over the tasks of the operator
// named "source".
func (ch *ClickHouse) Lag(ctx context.Context, job string) ([]Point, error) {
	return ch.series(ctx, job, "kafka_lag", "operator = 'source'")
}

// ThroughputByTask returns, per task of the operator, its records_in per
// second.
func (ch *ClickHouse) ThroughputByTask(ctx context.Context, job, operator string) (map[string][]Point, error) {
	t0, err := ch.jobStartMs(ctx, job)
	if errors.Is(err, ErrNoData) {
		return map[string][]Point{}, nil
	}
	if err != nil {
		return nil, err
	}
	return ch.byTask(ctx, t0, "throughput by task", "SELECT task, "+secondExpr+" AS s, toFloat64(sum(records_in)) FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND operator = "+quoteString(operator)+
		" GROUP BY task, s ORDER BY task, s")
}

// series returns sum(expr) per second over the job's task rows matching where.
func (ch *ClickHouse) series(ctx context.Context, job, expr, where string) ([]Point, error) {
	t0, err := ch.jobStartMs(ctx, job)
	if errors.Is(err, ErrNoData) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ch.perSecond(ctx, t0, "series "+expr, "SELECT "+secondExpr+" AS s, toFloat64(sum("+expr+")) FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND "+where+
		" GROUP BY s ORDER BY s")
}

// secondExpr is the Unix second of a row. The cast pins the type: the
// result type of intDiv differs between server versions.
const secondExpr = "toUInt64(intDiv(ts_ms, 1000))"

// perSecond runs a SELECT of (UInt64 second, Float64 value) rows and returns
// them as Points relative to t0 (ms); what names the series in errors.
func (ch *ClickHouse) perSecond(ctx context.Context, t0 uint64, what, sql string) ([]Point, error) {
	pts := []Point{}
	err := ch.selectRows(ctx, sql, func(r driver.Rows) error {
		var sec uint64
		var v float64
		if err := r.Scan(&sec, &v); err != nil {
			return err
		}
		pts = append(pts, point(t0, sec, v))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: %s: %w", what, err)
	}
	return pts, nil
}

// byTask runs a SELECT of (String task, UInt64 second, Float64 value) rows
// and returns each task's Points relative to t0 (ms).
func (ch *ClickHouse) byTask(ctx context.Context, t0 uint64, what, sql string) (map[string][]Point, error) {
	out := make(map[string][]Point)
	err := ch.selectRows(ctx, sql, func(r driver.Rows) error {
		var task string
		var sec uint64
		var v float64
		if err := r.Scan(&task, &sec, &v); err != nil {
			return err
		}
		out[task] = append(out[task], point(t0, sec, v))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: %s: %w", what, err)
	}
	return out, nil
}

// point converts a (unix second, value) pair into a Point relative to t0 (ms).
func point(t0, sec uint64, v float64) Point {
	return Point{Sec: (float64(sec*1000) - float64(t0)) / 1000, Value: v}
}

// ReconfigEvents returns the job's reconfiguration events ordered by time.
func (ch *ClickHouse) ReconfigEvents(ctx context.Context, job string) ([]ReconfigEvent, error) {
	evs := []ReconfigEvent{}
	err := ch.selectRows(ctx, "SELECT ts_ms, experiment, job, reconfig_id, protocol, step, phase, millis, detail FROM "+
		ch.table(ReconfigTable)+" WHERE job = "+quoteString(job)+" ORDER BY ts_ms",
		func(r driver.Rows) error {
			var ms uint64
			var e ReconfigEvent
			if err := r.Scan(&ms, &e.Experiment, &e.Job, &e.ReconfigID, &e.Protocol, &e.Step, &e.Phase, &e.Millis, &e.Detail); err != nil {
				return err
			}
			e.Time = time.UnixMilli(int64(ms))
			evs = append(evs, e)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("metrics: reconfig events of %q: %w", job, err)
	}
	return evs, nil
}
