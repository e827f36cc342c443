package experiments

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"koala/workflows"
)

// SuiteSummaryFile is the summary written into a suite's result directory.
const SuiteSummaryFile = "summary.json"

// SuiteSummary is summary.json: the suite, its workflow and every entry's
// outcome, in order.
type SuiteSummary struct {
	Suite      string                       `json:"suite"`
	File       string                       `json:"file"`
	WorkflowID string                       `json:"workflow_id"`
	RunID      string                       `json:"run_id"`
	Started    time.Time                    `json:"started"`
	Finished   time.Time                    `json:"finished"`
	Entries    []workflows.SuiteEntryResult `json:"entries"`
	// Planned is how many experiments the suite has; fewer entries ran
	// when StopOnFailure ended it early.
	Planned    int    `json:"planned,omitempty"`
	LogsDir    string `json:"logs_dir"`
	ResultsDir string `json:"results_dir"`
}

// WriteSuiteSummary writes summary.json into dir and returns its path.
func WriteSuiteSummary(dir string, s SuiteSummary) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, SuiteSummaryFile)
	return p, os.WriteFile(p, append(data, '\n'), 0o644)
}

// ReadSuiteSummary reads dir/summary.json.
func ReadSuiteSummary(dir string) (SuiteSummary, error) {
	var s SuiteSummary
	data, err := os.ReadFile(filepath.Join(dir, SuiteSummaryFile))
	if err != nil {
		return s, fmt.Errorf("suite summary: %w (is %s a `koala suite` result directory?)", err, dir)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("suite summary %s: %w", filepath.Join(dir, SuiteSummaryFile), err)
	}
	return s, nil
}

// WriteSuiteTable prints the artifact's suite summary:
//
//	============================================================
//	Suite summary
//	============================================================
//	SUCCEEDED   65s counter_2to4 -> lazy
//	FAILED      12s counter_2to4 -> drrs: <error>
//	Logs: <dir>
//	Results: <dir>
func WriteSuiteTable(w io.Writer, s SuiteSummary) error {
	var b strings.Builder
	rule := strings.Repeat("=", 60)
	fmt.Fprintf(&b, "%s\nSuite summary\n%s\n", rule, rule)
	for _, e := range s.Entries {
		fmt.Fprintf(&b, "%-9s %5.0fs %s -> %s", e.Status, e.Seconds, e.Experiment, e.Keyword)
		switch {
		case e.Status == workflows.SuiteSucceeded && e.ExactnessUnchecked != "":
			b.WriteString("  (exactness not checked at run time)")
		case e.Status == workflows.SuiteSucceeded:
			fmt.Fprintf(&b, "  (lost=%d duplicated=%d reordered=%d)", e.Lost, e.Duplicated, e.Reordered)
		}
		if e.Attempts > 1 {
			fmt.Fprintf(&b, " (%d attempts)", e.Attempts)
		}
		if e.Error != "" {
			fmt.Fprintf(&b, ": %s", oneLine(e.Error, 160))
		}
		b.WriteString("\n")
	}
	if n := s.Planned - len(s.Entries); n > 0 {
		fmt.Fprintf(&b, "%d experiment(s) were not run (StopOnFailure)\n", n)
	}
	fmt.Fprintf(&b, "Logs: %s\nResults: %s\n", s.LogsDir, s.ResultsDir)
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
