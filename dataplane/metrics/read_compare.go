package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Aggregations accepted by ColumnSeries and ColumnByTask.
const (
	AggSum = "sum"
	AggMax = "max"
)

// numericTaskColumn reports whether column is a UInt64 or Float64 column of
// task_metrics other than the timestamp.
func numericTaskColumn(column string) bool {
	for _, def := range strings.Split(taskColumnDefs, ", ") {
		name, typ, _ := strings.Cut(def, " ")
		if name == column {
			return name != "ts_ms" && (typ == "UInt64" || typ == "Float64")
		}
	}
	return false
}

func checkColumnAgg(column, agg string) error {
	if !numericTaskColumn(column) {
		return fmt.Errorf("metrics: %q is not a numeric column of %s", column, TaskTable)
	}
	if agg != AggSum && agg != AggMax {
		return fmt.Errorf("metrics: aggregation %q: want %q or %q", agg, AggSum, AggMax)
	}
	return nil
}

// ColumnSeries returns agg(column) per second over the tasks of the
// operator (all operators when operator is ""), agg being AggSum or AggMax.
// Seconds without rows are absent; points are relative to JobStart.
func (ch *ClickHouse) ColumnSeries(ctx context.Context, job, operator, column, agg string) ([]Point, error) {
	if err := checkColumnAgg(column, agg); err != nil {
		return nil, err
	}
	t0, err := ch.jobStartMs(ctx, job)
	if errors.Is(err, ErrNoData) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	where := "job = " + quoteString(job)
	if operator != "" {
		where += " AND operator = " + quoteString(operator)
	}
	rows, err := ch.Query(ctx, "SELECT intDiv(ts_ms, 1000) AS s, "+agg+"("+column+") FROM "+
		ch.table(TaskTable)+" WHERE "+where+" GROUP BY s ORDER BY s")
	if err != nil {
		return nil, err
	}
	pts := make([]Point, 0, len(rows))
	for _, r := range rows {
		if len(r) != 2 {
			return nil, fmt.Errorf("metrics: %s(%s) series: unexpected row %q", agg, column, r)
		}
		p, err := point(t0, r[0], r[1])
		if err != nil {
			return nil, err
		}
		pts = append(pts, p)
	}
	return pts, nil
}

// ColumnByTask returns, per task of the operator, agg(column) per second
// (a task has one row a second, so the aggregation only matters when two
// rows land in the same second). Points are relative to JobStart.
func (ch *ClickHouse) ColumnByTask(ctx context.Context, job, operator, column, agg string) (map[string][]Point, error) {
	if err := checkColumnAgg(column, agg); err != nil {
		return nil, err
	}
	t0, err := ch.jobStartMs(ctx, job)
	if errors.Is(err, ErrNoData) {
		return map[string][]Point{}, nil
	}
	if err != nil {
		return nil, err
	}
	rows, err := ch.Query(ctx, "SELECT task, intDiv(ts_ms, 1000) AS s, "+agg+"("+column+") FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND operator = "+quoteString(operator)+
		" GROUP BY task, s ORDER BY task, s")
	if err != nil {
		return nil, err
	}
	out := make(map[string][]Point)
	for _, r := range rows {
		if len(r) != 3 {
			return nil, fmt.Errorf("metrics: %s(%s) by task: unexpected row %q", agg, column, r)
		}
		p, err := point(t0, r[1], r[2])
		if err != nil {
			return nil, err
		}
		out[r[0]] = append(out[r[0]], p)
	}
	return out, nil
}
