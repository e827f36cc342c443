package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"koala/dataplane/metrics"
	"koala/experiments"
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
		res, err := readRawResult(dir, row.Protocol)
		var unread *fs.PathError
		if errors.As(err, &unread) {
			fmt.Printf("%s: row kept as it was: %v\n", row.Protocol, err)
			continue
		}
		if err != nil {
			return fmt.Errorf("--report %s: %w", dir, err)
		}
		cmp.Rows[i] = buildRow(ctx, ch, row, res, int(row.InputSec), drainLag)
		fmt.Printf("%s: re-read job %s\n", row.Protocol, res.JobID)
	}
	return writeComparison(cmp, dir)
}
