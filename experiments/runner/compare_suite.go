package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"koala/experiments"
	"koala/workflows"
)

// CompareSuiteOptions configure CompareSuite.
type CompareSuiteOptions struct {
	Services
	File       string // a comparison suite (experiments.IsCompareSuite)
	ResultsDir string
	// StateServerBinary, Gap, FlushWait, Margin and DialNATS are as in
	// CompareOptions, for every comparison.
	StateServerBinary string
	Gap               time.Duration
	FlushWait         time.Duration
	Margin            time.Duration
	DialNATS          func() (*nats.Conn, error)
	// Profile: as in CompareOptions, for every comparison.
	Profile *ProfileOptions
}

// CheckCompareSuite loads the comparison suite at path and checks every
// comparison as `koala compare` would (protocols, probe, config), so a bad
// entry is reported before anything runs.
func CheckCompareSuite(path string) (experiments.CompareSuite, error) {
	s, err := experiments.LoadCompareSuite(path)
	if err != nil {
		return s, err
	}
	_, err = experiments.CompareSuiteInputs(s)
	errs := []error{err}
	for i, c := range s.Comparisons {
		if _, _, _, err := checkCompare(compareOptionsOf(CompareSuiteOptions{}, c)); err != nil {
			errs = append(errs, fmt.Errorf("%s: Comparisons[%d] (%s): %w", path, i, c.Config, err))
		}
	}
	return s, errors.Join(errs...)
}

// compareOptionsOf is the comparison c of a suite run with o.
func compareOptionsOf(o CompareSuiteOptions, c experiments.CompareSpec) CompareOptions {
	return CompareOptions{
		Services: o.Services, Config: c.Config, Protocols: strings.Join(c.Protocols, ","), ResultsDir: o.ResultsDir,
		StateServerBinary: o.StateServerBinary, Gap: o.Gap, FlushWait: o.FlushWait, Margin: o.Margin, DialNATS: o.DialNATS,
		Overload: c.Overload, ProbeFrom: c.ProbeFrom, ProbeFactor: c.ProbeFactor, ProbeMax: c.ProbeMax, ProbeStepSec: c.ProbeStepSeconds,
		Profile: o.Profile,
	}
}

// CompareSuite runs the comparisons of a comparison suite one after
// another, each as `koala compare` does (its own rate probe and, for the
// remote protocol, its own `koala statesvc`), into
// ResultsDir/suite_<stamp>/compare-<stamp>/. It then writes the suite's
// summary.json (one entry per protocol run, keyword lazy, SAR, DRRS or
// Remote, so `koala figures` draws Fig 6 and 8 and the artifact's
// Figure6/Figure8 from it) and summary.md (CompareSuiteTable and each
// comparison's table), and prints the table. A comparison that fails does
// not stop the others; the error lists them all.
func CompareSuite(ctx context.Context, o CompareSuiteOptions) error {
	s, err := CheckCompareSuite(o.File)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(o.File)
	if err != nil {
		return fmt.Errorf("suite %s: %w", o.File, err)
	}
	started := time.Now()
	dir := filepath.Join(o.ResultsDir, "suite_"+started.Format("20060102-150405"))
	sum := experiments.SuiteSummary{Suite: s.Name, File: abs, Started: started, ResultsDir: dir, Planned: plannedRuns(s)}
	fmt.Printf("suite %s: %d comparison(s), %d run(s)\n  results: %s\n", s.Name, len(s.Comparisons), sum.Planned, dir)
	var cmps []experiments.Comparison
	var errs []error
	for i, c := range s.Comparisons {
		if ctx.Err() != nil {
			break
		}
		if i > 0 {
			Sleep(ctx, o.Gap)
		}
		fmt.Printf("\n=== comparison %d/%d: %s\n", i+1, len(s.Comparisons), c.Config)
		co := compareOptionsOf(o, c)
		co.ResultsDir = dir
		cmp, cdir, err := compare(ctx, co)
		if err != nil {
			errs = append(errs, fmt.Errorf("comparison %d (%s): %w", i+1, c.Config, err))
		}
		if cdir == "" {
			continue
		}
		cmps = append(cmps, cmp)
		sum.Entries = append(sum.Entries, suiteEntries(len(sum.Entries), cmp, cdir)...)
	}
	sum.Finished = time.Now()
	if _, err := experiments.WriteSuiteSummary(dir, sum); err != nil {
		errs = append(errs, fmt.Errorf("write suite summary: %w", err))
	}
	table, err := writeCompareSuiteMarkdown(dir, s.Name, abs, started, sum.Finished, cmps)
	if err != nil {
		errs = append(errs, err)
	}
	fmt.Printf("\nsuite %s\n\n%s\nwrote %s\nwrote %s\nfigures: koala figures %s\n", s.Name, table,
		filepath.Join(dir, experiments.SuiteSummaryFile), filepath.Join(dir, compareSuiteMarkdown), dir)
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("suite interrupted after %d of %d comparisons", len(cmps), len(s.Comparisons)))
	}
	return errors.Join(errs...)
}

// compareSuiteMarkdown is the comparison suite's report beside
// summary.json.
const compareSuiteMarkdown = "summary.md"

// writeCompareSuiteMarkdown writes dir/summary.md: the targets table
// (returned) and each comparison's table.
func writeCompareSuiteMarkdown(dir, name, file string, started, finished time.Time, cmps []experiments.Comparison) (string, error) {
	table := experiments.CompareSuiteTable(cmps)
	md := fmt.Sprintf("# Suite %s\n\n%s, %d comparison(s) from %s to %s.\n\n%s", name, file, len(cmps),
		started.UTC().Format(time.RFC3339), finished.UTC().Format(time.RFC3339), table)
	for _, c := range cmps {
		md += fmt.Sprintf("\n## %s\n\n", c.Experiment)
		var b strings.Builder
		if err := c.WriteTable(&b); err == nil {
			md += "```\n" + b.String() + "```\n"
		}
	}
	if err := os.WriteFile(filepath.Join(dir, compareSuiteMarkdown), []byte(md), 0o644); err != nil {
		return table, fmt.Errorf("write %s: %w", compareSuiteMarkdown, err)
	}
	return table, nil
}

// CompareSuiteReport rewrites the summary.md of the comparison suite run
// kept in dir from its comparisons' compare.json (as run; `koala compare
// --report` on a compare-* directory re-reads its series first), so a
// table added since appears for it, and prints the targets table.
func CompareSuiteReport(dir string) error {
	sum, err := experiments.ReadSuiteSummary(dir)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "compare-*", experiments.CompareJSONFile))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("--report %s: no compare-*/%s (want a directory a comparison suite wrote)", dir, experiments.CompareJSONFile)
	}
	slices.Sort(files) // compare-<stamp>: in run order
	var cmps []experiments.Comparison
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("--report: %w", err)
		}
		var c experiments.Comparison
		if err := json.Unmarshal(data, &c); err != nil {
			return fmt.Errorf("--report %s: %w", f, err)
		}
		cmps = append(cmps, c)
	}
	table, err := writeCompareSuiteMarkdown(dir, sum.Suite, sum.File, sum.Started, sum.Finished, cmps)
	fmt.Printf("suite %s\n\n%s\nwrote %s\n", sum.Suite, table, filepath.Join(dir, compareSuiteMarkdown))
	return err
}

// plannedRuns is how many protocol runs the suite makes.
func plannedRuns(s experiments.CompareSuite) int {
	n := 0
	for _, c := range s.Comparisons {
		n += len(c.Protocols)
	}
	return n
}

// suiteEntries are the suite entries of cmp's rows (indices from done+1),
// completed runs from the raw results kept in dir.
func suiteEntries(done int, cmp experiments.Comparison, dir string) []workflows.SuiteEntryResult {
	var out []workflows.SuiteEntryResult
	for _, row := range cmp.Rows {
		in := workflows.ExperimentInput{Name: cmp.Experiment, ReconfigProtocol: row.ReconfigProtocol, StateBackend: row.StateBackend}
		var res workflows.ExperimentResult
		var err error
		if row.Status == experiments.StatusOK {
			res, err = readRawResult(dir, row.Protocol)
			in.TotalRuntimeSeconds = int(row.InputSec)
		} else {
			err = fmt.Errorf("%s: %s", row.Status, row.Reason)
		}
		e := workflows.SuiteEntryOf(done+len(out)+1, experiments.ArtifactKeyword(row.Protocol), row.WorkflowID, in, res, err, 0)
		out = append(out, e)
	}
	return out
}

// readRawResult reads the result WriteRawResult kept in dir for name. A
// file it cannot read is a *fs.PathError (Report keeps that row as it
// was); one it cannot parse is not.
func readRawResult(dir, name string) (workflows.ExperimentResult, error) {
	var res workflows.ExperimentResult
	data, err := os.ReadFile(filepath.Join(dir, "result-"+name+".json"))
	if err != nil {
		return res, fmt.Errorf("raw result: %w", err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return res, fmt.Errorf("raw result %s: %w", filepath.Join(dir, "result-"+name+".json"), err)
	}
	return res, nil
}
