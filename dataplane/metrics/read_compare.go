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
	// toFloat64: the column is UInt64 or Float64, the Points are float64.
	return ch.perSecond(ctx, t0, agg+"("+column+") series", "SELECT "+secondExpr+" AS s, toFloat64("+agg+"("+column+")) FROM "+
		ch.table(TaskTable)+" WHERE "+where+" GROUP BY s ORDER BY s")
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
	return ch.byTask(ctx, t0, agg+"("+column+") by task", "SELECT task, "+secondExpr+" AS s, toFloat64("+agg+"("+column+")) FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND operator = "+quoteString(operator)+
		" GROUP BY task, s ORDER BY task, s")
}
