package metrics

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// BatchHistSample is one task's batch-time histogram of one second, as
// Take encoded it. Sec is on the job's metric axis (see Point).
type BatchHistSample struct {
	Task string
	Sec  float64
	Hist string
}

// BatchHists returns the operator's non-empty batch-time histograms, per
// task and second, ordered by task and time. Rows written before the
// column existed have none and are left out.
func (ch *ClickHouse) BatchHists(ctx context.Context, job, operator string) ([]BatchHistSample, error) {
	t0, err := ch.jobStartMs(ctx, job)
	if errors.Is(err, ErrNoData) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := []BatchHistSample{}
	err = ch.selectRows(ctx, "SELECT task, "+secondExpr+" AS s, batch_time_hdr FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND operator = "+quoteString(operator)+
		" AND batch_time_hdr != '' ORDER BY task, s",
		func(r driver.Rows) error {
			var s BatchHistSample
			var sec uint64
			if err := r.Scan(&s.Task, &sec, &s.Hist); err != nil {
				return err
			}
			s.Sec = point(t0, sec, 0).Sec
			out = append(out, s)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("metrics: batch histograms: %w", err)
	}
	return out, nil
}

// BatchHistWindow merges the samples with from ≤ Sec and Sec+1 ≤ to (the
// seconds wholly inside [from, to)) into one set of percentiles.
func BatchHistWindow(samples []BatchHistSample, from, to float64) (BatchPercentiles, bool, error) {
	var enc []string
	for _, s := range samples {
		if s.Sec >= from && s.Sec+1 <= to {
			enc = append(enc, s.Hist)
		}
	}
	return MergeBatchHists(enc)
}
