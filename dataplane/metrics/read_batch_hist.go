package metrics

import (
	"context"
	"errors"
	"fmt"
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
	rows, err := ch.Query(ctx, "SELECT task, intDiv(ts_ms, 1000) AS s, batch_time_hdr FROM "+
		ch.table(TaskTable)+" WHERE job = "+quoteString(job)+" AND operator = "+quoteString(operator)+
		" AND batch_time_hdr != '' ORDER BY task, s")
	if err != nil {
		return nil, err
	}
	out := make([]BatchHistSample, 0, len(rows))
	for _, r := range rows {
		if len(r) != 3 {
			return nil, fmt.Errorf("metrics: batch histograms: unexpected row %q", r)
		}
		p, err := point(t0, r[1], "0")
		if err != nil {
			return nil, err
		}
		out = append(out, BatchHistSample{Task: r[0], Sec: p.Sec, Hist: r[2]})
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
