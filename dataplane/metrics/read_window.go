package metrics

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// TaskRows returns the job's task metric rows of the seconds [from, to)
// (ordered by time, then task), with the columns a load estimate needs:
// time, operator, task, worker, records in and out, batches and their
// average time, Kafka lag, idle and backpressure ratios, and the state
// migration's bytes and keys moved and lookup-table entries left. The
// autoscaler reads its window with it (a few rows per task and second),
// and koala ui its live charts.
func (ch *ClickHouse) TaskRows(ctx context.Context, job string, from, to time.Time) ([]TaskRow, error) {
	out := []TaskRow{}
	sql := "SELECT ts_ms, operator, task, worker, records_in, records_out, batches, batch_time_avg_us, kafka_lag, idle_ratio, backpressure_ratio, " +
		"bytes_transferred, keys_fetched, klt_size FROM " +
		ch.table(TaskTable) + " WHERE job = " + quoteString(job) +
		" AND ts_ms >= " + strconv.FormatInt(max(from.Truncate(time.Second).UnixMilli(), 0), 10) +
		" AND ts_ms < " + strconv.FormatInt(max(to.Truncate(time.Second).UnixMilli(), 0), 10) +
		" ORDER BY ts_ms, task"
	err := ch.selectRows(ctx, sql, func(r driver.Rows) error {
		var ms uint64
		row := TaskRow{Job: job}
		if err := r.Scan(&ms, &row.Operator, &row.Task, &row.Worker, &row.RecordsIn, &row.RecordsOut, &row.Batches,
			&row.BatchTimeAvgUs, &row.KafkaLag, &row.IdleRatio, &row.BackpressureRatio,
			&row.BytesTransferred, &row.KeysFetched, &row.KLTSize); err != nil {
			return err
		}
		row.Time = time.UnixMilli(int64(ms))
		out = append(out, row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: task rows of %q from %s to %s: %w", job, from.UTC().Format(time.TimeOnly), to.UTC().Format(time.TimeOnly), err)
	}
	return out, nil
}

// TaskRows returns the recorded rows of job whose second is in [from, to),
// in arrival order (the in-memory counterpart of ClickHouse.TaskRows).
func (m *Memory) TaskRows(_ context.Context, job string, from, to time.Time) ([]TaskRow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []TaskRow
	for _, r := range m.tasks {
		at := r.Time.Truncate(time.Second)
		if r.Job == job && !at.Before(from.Truncate(time.Second)) && at.Before(to.Truncate(time.Second)) {
			out = append(out, r)
		}
	}
	return out, nil
}
