package runner

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koala/dataplane/metrics"
	"koala/experiments"
)

// TestReportRawResults: a run whose raw result is missing keeps its row as
// it was, and one whose raw result is corrupt fails the report, naming it.
// Neither reaches ClickHouse.
func TestReportRawResults(t *testing.T) {
	write := func(t *testing.T, dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmp := experiments.Comparison{Rows: []experiments.CompareRow{{Protocol: "lazy", Status: experiments.StatusOK, Reason: "kept"}}}
	data, err := json.Marshal(cmp)
	if err != nil {
		t.Fatal(err)
	}
	ch := &metrics.ClickHouse{} // never queried on these paths

	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, experiments.CompareJSONFile, string(data))
		if err := Report(context.Background(), ch, dir); err != nil {
			t.Fatalf("report with a missing raw result: %v", err)
		}
		out, err := os.ReadFile(filepath.Join(dir, experiments.CompareJSONFile))
		if err != nil {
			t.Fatal(err)
		}
		var got experiments.Comparison
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Rows) != 1 || got.Rows[0].Reason != "kept" {
			t.Fatalf("rows rewritten as %+v, want the lazy row kept", got.Rows)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, experiments.CompareJSONFile, string(data))
		write(t, dir, "result-lazy.json", "{not json")
		err := Report(context.Background(), ch, dir)
		if err == nil || !strings.Contains(err.Error(), "result-lazy.json") {
			t.Fatalf("report with a corrupt raw result: %v, want an error naming result-lazy.json", err)
		}
	})
}
