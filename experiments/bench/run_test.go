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
	for _, f := range []string{"state-scaling.json", "state-scaling.log"} {
		if _, err := os.Stat(filepath.Join(o.ResultsDir, f)); err != nil {
			t.Error(err)
		}
	}
	// A run of one phase leaves the suite's raw JSON alone and writes its
	// own, with its report, under the run's stamped directory.
	if _, err := os.Stat(filepath.Join(o.ResultsDir, "bench.json")); !os.IsNotExist(err) {
		t.Errorf("a state-only run wrote %s (err %v)", filepath.Join(o.ResultsDir, "bench.json"), err)
	}
	for _, f := range []string{"bench.json", DefaultReport} {
		if m, _ := filepath.Glob(filepath.Join(o.ResultsDir, "run-*", f)); len(m) != 1 {
			t.Errorf("run-*/%s: found %v, want one", f, m)
		}
	}
}

func TestReportFull(t *testing.T) {
	for _, c := range []struct {
		phases []string
		rows   string
		want   bool
	}{
		{BenchPhases, "all", true},
		{BenchPhases, "", true},
		{BenchPhases, "q6-1task", false},
		{BenchPhases[1:], "all", false},
		{[]string{PhaseState}, "all", false},
	} {
		if got := (BenchReport{Phases: c.phases, Rows: c.rows}).Full(); got != c.want {
			t.Errorf("phases %v rows %q: Full() = %v, want %v", c.phases, c.rows, got, c.want)
		}
	}
}
