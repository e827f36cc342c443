package experiments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"koala/workflows"
)

// A suite file lists experiment configs in the order they run, each with a
// keyword naming the variant, as the Koala artifact's fullSuite.json does:
//
//	{"Name": "section5_2", "Experiments": [
//	  {"Config": "section5_2/counter_100kKeys.json", "Keyword": "lazy_100kKeys"}, ...]}
//
// Config paths are relative to the suite file's directory.
var (
	suiteFields      = []string{"Name", "Experiments", "Figures"}
	suiteEntryFields = []string{"Config", "Keyword"}
)

// SuiteFileEntry is one experiment of a suite file.
type SuiteFileEntry struct {
	Config  string // as written in the file
	Path    string // resolved against the suite file's directory
	Keyword string
}

// Suite is a parsed suite file with every config loaded.
type Suite struct {
	File    string
	Name    string
	Entries []SuiteFileEntry
	Input   workflows.SuiteInput
	// Figures `koala figures` draws for the suite (figures_select.go).
	Figures []string
}

// LoadSuite reads a suite file and loads every config it names with
// LoadConfig. Every problem found is reported (joined): unknown fields with
// the nearest known name, missing or duplicate keywords, config files that
// do not exist or do not parse.
func LoadSuite(path string) (Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Suite{}, fmt.Errorf("suite: %w", err)
	}
	return ParseSuite(path, data, LoadConfig)
}

// ParseSuite parses suite file data (named path, which also anchors relative
// config paths) and loads each config with load.
func ParseSuite(path string, data []byte, load func(string) (workflows.ExperimentInput, error)) (Suite, error) {
	s := Suite{File: path}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	top, err := strictObject(data, suiteFields)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range top.unknown {
		fail("unknown field %q%s", k, suggest(k, suiteFields))
	}
	if raw, ok := top.fields["Name"]; !ok {
		fail(`"Name" is required`)
	} else if err := json.Unmarshal(raw, &s.Name); err != nil || strings.TrimSpace(s.Name) == "" {
		fail(`"Name" must be a non-empty string, got %s`, compact(raw))
	}
	s.Figures = DefaultFigures
	if raw, ok := top.fields["Figures"]; ok {
		if err := json.Unmarshal(raw, &s.Figures); err != nil {
			fail(`"Figures" must be a list of figure numbers as strings (e.g. ["10"]), got %s`, compact(raw))
		} else if err := CheckFigures(s.Figures); err != nil {
			fail("%v", err)
		}
	}
	var entries []json.RawMessage
	if raw, ok := top.fields["Experiments"]; !ok {
		fail(`"Experiments" is required`)
	} else if err := json.Unmarshal(raw, &entries); err != nil {
		fail(`"Experiments" must be a list of {"Config", "Keyword"} objects, got %s`, kindOf(raw))
	} else if len(entries) == 0 {
		fail(`"Experiments" is empty`)
	}
	dir := filepath.Dir(path)
	seen := map[string]int{}
	for i, raw := range entries {
		at := fmt.Sprintf("Experiments[%d]", i)
		obj, err := strictObject(raw, suiteEntryFields)
		if err != nil {
			fail("%s: %v", at, err)
			continue
		}
		for _, k := range obj.unknown {
			fail("%s: unknown field %q%s", at, k, suggest(k, suiteEntryFields))
		}
		var e SuiteFileEntry
		for _, f := range []struct {
			name string
			dst  *string
		}{{"Config", &e.Config}, {"Keyword", &e.Keyword}} {
			raw, ok := obj.fields[f.name]
			if !ok {
				fail("%s: %q is required", at, f.name)
				continue
			}
			if err := json.Unmarshal(raw, f.dst); err != nil || strings.TrimSpace(*f.dst) == "" {
				fail("%s.%s must be a non-empty string, got %s", at, f.name, compact(raw))
			}
		}
		if e.Keyword != "" {
			if j, dup := seen[e.Keyword]; dup {
				fail("%s.Keyword %q is already used by Experiments[%d]", at, e.Keyword, j)
			}
			seen[e.Keyword] = i
		}
		if e.Config == "" {
			continue
		}
		e.Path = e.Config
		if !filepath.IsAbs(e.Path) {
			e.Path = filepath.Join(dir, e.Path)
		}
		if _, err := os.Stat(e.Path); err != nil {
			fail("%s.Config: config file %s does not exist (paths are relative to the suite file's directory %s)", at, e.Path, dir)
			continue
		}
		in, err := load(e.Path)
		if err != nil {
			fail("%s.Config: %v", at, err)
			continue
		}
		s.Entries = append(s.Entries, e)
		s.Input.Entries = append(s.Input.Entries, workflows.SuiteEntry{Keyword: e.Keyword, Input: in})
	}
	s.Input.Name = s.Name
	if len(errs) > 0 {
		return Suite{}, errors.Join(errs...)
	}
	return s, nil
}

type jsonObject struct {
	fields  map[string]json.RawMessage
	unknown []string // in file order
}

// strictObject decodes a JSON object, keeping the members named in known and
// listing the others; repeated members are an error.
func strictObject(data []byte, known []string) (jsonObject, error) {
	o := jsonObject{fields: map[string]json.RawMessage{}}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return o, fmt.Errorf("not valid JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return o, fmt.Errorf("want a JSON object, got %s", kindOf(bytes.TrimSpace(data)))
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, fmt.Errorf("not valid JSON: %w", err)
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return o, fmt.Errorf("not valid JSON at %q: %w", key, err)
		}
		if _, dup := o.fields[key]; dup {
			return o, fmt.Errorf("field %q is given twice", key)
		}
		isKnown := false
		for _, k := range known {
			isKnown = isKnown || k == key
		}
		if isKnown {
			o.fields[key] = raw
		} else {
			o.unknown = append(o.unknown, key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return o, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return o, errors.New("not valid JSON: data after the object")
	}
	return o, nil
}

// ---------------------------------------------------------------- summary

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
	LogsDir    string                       `json:"logs_dir"`
	ResultsDir string                       `json:"results_dir"`
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
		if e.Error != "" {
			fmt.Fprintf(&b, ": %s", oneLine(e.Error, 160))
		}
		b.WriteString("\n")
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
