package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// A state-only run needs neither Temporal nor ClickHouse nor the go
// toolchain, and writes the report with the state section and its target.
func TestRunStateOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process cluster")
	}
	dir := t.TempDir()
	o := Options{
		DialTemporal: func(context.Context) (client.Client, error) {
			t.Error("a state-only run dialled Temporal")
			return nil, context.Canceled
		},
		RunDir: filepath.Join(dir, "run"), ResultsDir: filepath.Join(dir, "results"), MDPath: filepath.Join(dir, "BENCHMARKS.md"),
		Phases: "state", StateSizes: "60KB,120KB", StateValueBytes: 64, StateActiveKeys: 200,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Run(ctx, o); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(o.MDPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Scaling with state", "koala bench --phases state --state-sizes 60KB,120KB", "bytes migrated proportional to active keys"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, f := range []string{"bench.json", "state-scaling.json", "state-scaling.log"} {
		if _, err := os.Stat(filepath.Join(o.ResultsDir, f)); err != nil {
			t.Error(err)
		}
	}
}
