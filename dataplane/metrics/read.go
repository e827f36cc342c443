package metrics

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrNoData is returned by JobStart when the job has no metric rows.
var ErrNoData = errors.New("metrics: no metric rows for job")

var formatClause = regexp.MustCompile(`(?i)\bFORMAT\s+\w+\s*$`)

// Query runs a SELECT and returns its rows as unescaped TabSeparated fields.
// "FORMAT TabSeparated" is appended unless the statement has a FORMAT clause.
// Errors carry ClickHouse's response body.
func (ch *ClickHouse) Query(ctx context.Context, sql string) ([][]string, error) {
	sql = strings.TrimRight(strings.TrimSpace(sql), ";")
	if !formatClause.MatchString(sql) {
		sql += " FORMAT TabSeparated"
	}
	body, err := ch.do(ctx, "", true, strings.NewReader(sql))
	if err != nil {
		return nil, err
	}
	return parseTSV(body), nil
}

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
	rows, err := ch.Query(ctx, "SELECT count(), min(ts_ms) FROM "+ch.table(TaskTable)+
		" WHERE job = "+quoteString(job))
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		return 0, fmt.Errorf("metrics: job start of %q: unexpected result %q", job, rows)
	}
	if rows[0][0] == "0" {
		return 0, fmt.Errorf("%w %q", ErrNoData, job)
	}
	return strconv.ParseUint(rows[0][1], 10, 64)
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
	rows, err := ch.Query(ctx, "SELECT task, intDiv(ts_ms, 1000) AS s, sum(records_in) FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND operator = "+quoteString(operator)+
		" GROUP BY task, s ORDER BY task, s")
	if err != nil {
		return nil, err
	}
	out := make(map[string][]Point)
	for _, r := range rows {
		if len(r) != 3 {
			return nil, fmt.Errorf("metrics: throughput by task: unexpected row %q", r)
		}
		p, err := point(t0, r[1], r[2])
		if err != nil {
			return nil, err
		}
		out[r[0]] = append(out[r[0]], p)
	}
	return out, nil
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
	rows, err := ch.Query(ctx, "SELECT intDiv(ts_ms, 1000) AS s, sum("+expr+") FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND "+where+
		" GROUP BY s ORDER BY s")
	if err != nil {
		return nil, err
	}
	pts := make([]Point, 0, len(rows))
	for _, r := range rows {
		if len(r) != 2 {
			return nil, fmt.Errorf("metrics: series %s: unexpected row %q", expr, r)
		}
		p, err := point(t0, r[0], r[1])
		if err != nil {
			return nil, err
		}
		pts = append(pts, p)
	}
	return pts, nil
}

// point converts a (unix second, value) pair into a Point relative to t0 (ms).
func point(t0 uint64, sec, value string) (Point, error) {
	s, err := strconv.ParseUint(sec, 10, 64)
	if err != nil {
		return Point{}, fmt.Errorf("metrics: bad second %q: %w", sec, err)
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return Point{}, fmt.Errorf("metrics: bad value %q: %w", value, err)
	}
	return Point{Sec: (float64(s*1000) - float64(t0)) / 1000, Value: v}, nil
}

// ReconfigEvents returns the job's reconfiguration events ordered by time.
func (ch *ClickHouse) ReconfigEvents(ctx context.Context, job string) ([]ReconfigEvent, error) {
	rows, err := ch.Query(ctx, "SELECT ts_ms, experiment, job, reconfig_id, protocol, step, phase, millis, detail FROM "+
		ch.table(ReconfigTable)+" WHERE job = "+quoteString(job)+" ORDER BY ts_ms")
	if err != nil {
		return nil, err
	}
	evs := make([]ReconfigEvent, 0, len(rows))
	for _, r := range rows {
		if len(r) != 9 {
			return nil, fmt.Errorf("metrics: reconfig events: unexpected row %q", r)
		}
		ms, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: reconfig events: bad ts_ms %q: %w", r[0], err)
		}
		millis, err := strconv.ParseFloat(r[7], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: reconfig events: bad millis %q: %w", r[7], err)
		}
		evs = append(evs, ReconfigEvent{
			Time: time.UnixMilli(ms), Experiment: r[1], Job: r[2], ReconfigID: r[3],
			Protocol: r[4], Step: r[5], Phase: r[6], Millis: millis, Detail: r[8],
		})
	}
	return evs, nil
}
