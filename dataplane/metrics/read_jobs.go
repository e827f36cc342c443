package metrics

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// JobSeen is one job that wrote task metric rows: its experiment and the
// times of its first and last row.
type JobSeen struct {
	Job, Experiment string
	First, Last     time.Time
}

// JobsSince lists the jobs with a task metric row at or after since, the
// most recently active first (ties: by job name). koala ui lists them
// beside the jobs the workers run right now.
func (ch *ClickHouse) JobsSince(ctx context.Context, since time.Time) ([]JobSeen, error) {
	out := []JobSeen{}
	sql := "SELECT job, any(experiment), toUInt64(min(ts_ms)), toUInt64(max(ts_ms)) FROM " + ch.table(TaskTable) +
		" WHERE ts_ms >= " + strconv.FormatInt(max(since.UnixMilli(), 0), 10) +
		" GROUP BY job ORDER BY max(ts_ms) DESC, job"
	err := ch.selectRows(ctx, sql, func(r driver.Rows) error {
		var j JobSeen
		var first, last uint64
		if err := r.Scan(&j.Job, &j.Experiment, &first, &last); err != nil {
			return err
		}
		j.First, j.Last = time.UnixMilli(int64(first)), time.UnixMilli(int64(last))
		out = append(out, j)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metrics: jobs since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	return out, nil
}
