package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/workflows"
)

// Report rebuilds the comparison kept in dir (its compare.json and the raw
// results result-<protocol>.json of its runs) from the runs' series read
// again from ClickHouse, and rewrites the comparison's files there: a
// figure added since the comparison ran appears without running it again.
// A run whose raw result is missing keeps its row as it was.
func Report(ctx context.Context, ch *metrics.ClickHouse, dir string) error {
	if ch == nil {
		return errors.New("--report needs ClickHouse (--clickhouse): the series are read from it")
	}
	data, err := os.ReadFile(filepath.Join(dir, experiments.CompareJSONFile))
	if err != nil {
		return fmt.Errorf("--report %s: %w (want a directory koala compare wrote)", dir, err)
	}
	var cmp experiments.Comparison
	if err := json.Unmarshal(data, &cmp); err != nil {
		return fmt.Errorf("--report %s: %s: %w", dir, experiments.CompareJSONFile, err)
	}
	var drainLag float64
	if cmp.Load != nil {
		drainLag = cmp.Load.DrainLag
	}
	for i, row := range cmp.Rows {
		if row.Status != experiments.StatusOK {
			continue
		}
		p := filepath.Join(dir, "result-"+row.Protocol+".json")
		raw, err := os.ReadFile(p)
		if err != nil {
			fmt.Printf("%s: row kept as it was: %v\n", row.Protocol, err)
			continue
		}
		var res workflows.ExperimentResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("--report %s: %w", p, err)
		}
		sr, jobStart, merr := readSeries(ctx, ch, res)
		if len(sr.Sink) == 0 {
			sr.Sink = res.SinkThroughput
		}
		if jobStart.IsZero() {
			jobStart = res.StartedAt
		}
		sr.DrainLag = drainLag
		fresh := experiments.BuildRow(row, res, int(row.InputSec), jobStart, sr)
		fresh.MetricsError = ""
		if len(merr) > 0 {
			fresh.MetricsError = fmt.Sprint(merr)
		}
		cmp.Rows[i] = fresh
		fmt.Printf("%s: re-read job %s\n", row.Protocol, res.JobID)
	}
	fmt.Println()
	if err := cmp.WriteTable(os.Stdout); err != nil {
		return err
	}
	paths, err := cmp.WriteFiles(dir)
	fmt.Println()
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}
