package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"koala/workflows"
)

// A comparison suite runs `koala compare` once per listed config: each
// comparison probes the rate its own pre-scale pipeline sustains, runs every
// protocol at the same multiple of it and starts (and stops) its own `koala
// statesvc` for the remote protocol. A plain suite (Experiments) cannot:
// its runs are child workflows with no shared probed rate, and a workflow
// does not start processes on the machine it was started from. The file:
//
//	{"Name": "section5_2_gb", "Figures": ["6", "8"],
//	 "Comparisons": [{"Config": "section5_2_gb/q3_1to2.json",
//	   "Protocols": ["lazy", "stop-and-restart", "drrs", "remote"],
//	   "Overload": 1.3, "ProbeFrom": 15000, "ProbeFactor": 1.2,
//	   "ProbeMax": 200000, "ProbeStepSeconds": 8}]}
//
// Config paths are relative to the suite file.

// CompareSuite is a parsed comparison suite.
type CompareSuite struct {
	Name        string
	File        string
	Figures     []string
	Comparisons []CompareSpec
}

// CompareSpec is one comparison of a suite: what `koala compare CONFIG
// --protocols … --overload … --probe-…` would run.
type CompareSpec struct {
	Config    string   // path as resolved against the suite file
	Protocols []string // compare variants, in run order
	// Overload 0 runs at the config's rate; otherwise the probe's
	// staircase (ProbeFrom × ProbeFactor per step up to ProbeMax,
	// ProbeStepSeconds each) comes first.
	Overload         float64
	ProbeFrom        int
	ProbeFactor      float64
	ProbeMax         int
	ProbeStepSeconds int
}

// The probe's defaults, as `koala compare`'s flags have them.
const (
	DefaultProbeFrom    = 2000
	DefaultProbeFactor  = 1.15
	DefaultProbeMax     = 60000
	DefaultProbeStepSec = 8
)

var compareSuiteFields = []string{"Name", "Figures", "Comparisons", "_comment"}

// compareSpecJSON is a comparison as written in the file; pointers tell an
// absent field (defaulted) from a zero one (checked).
type compareSpecJSON struct {
	Config           string   `json:"Config"`
	Protocols        []string `json:"Protocols"`
	Overload         *float64 `json:"Overload"`
	ProbeFrom        *int     `json:"ProbeFrom"`
	ProbeFactor      *float64 `json:"ProbeFactor"`
	ProbeMax         *int     `json:"ProbeMax"`
	ProbeStepSeconds *int     `json:"ProbeStepSeconds"`
	Comment          any      `json:"_comment"`
}

// IsCompareSuite says whether data is a comparison suite: a JSON object
// with "Comparisons" (and so no "Experiments").
func IsCompareSuite(data []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return false
	}
	_, ok := top["Comparisons"]
	return ok
}

// LoadCompareSuite reads and checks the comparison suite at path.
func LoadCompareSuite(path string) (CompareSuite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return CompareSuite{}, fmt.Errorf("suite: %w", err)
	}
	return ParseCompareSuite(path, data)
}

// ParseCompareSuite parses comparison suite data named path (which anchors
// the config paths). Every problem is reported, each naming its field and
// what is allowed; a config file that does not exist is one of them. It
// does not read the configs.
func ParseCompareSuite(path string, data []byte) (CompareSuite, error) {
	s := CompareSuite{File: path}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	top, err := strictObject(data, compareSuiteFields)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range top.unknown {
		fail("unknown field %q%s (a comparison suite has Name, Figures and Comparisons)", k, suggest(k, compareSuiteFields))
	}
	s.Name, s.Figures = suiteNameAndFigures(top, path, fail)
	var entries []json.RawMessage
	if err := json.Unmarshal(top.fields["Comparisons"], &entries); err != nil {
		fail(`"Comparisons" must be a list of {"Config", "Protocols", "Overload", …} objects, got %s`, kindOf(top.fields["Comparisons"]))
	} else if len(entries) == 0 {
		fail(`"Comparisons" is empty`)
	}
	dir := filepath.Dir(path)
	seen := map[string]int{}
	for i, raw := range entries {
		where := fmt.Sprintf("Comparisons[%d]", i)
		spec, problems := parseCompareSpec(raw, dir)
		for _, p := range problems {
			fail("%s: %s", where, p)
		}
		if j, dup := seen[spec.Config]; dup && spec.Config != "" {
			// Their runs would share an experiment name, and so one line
			// per protocol in the figures.
			fail("%s: \"Config\" %s is already compared in Comparisons[%d]", where, spec.Config, j)
		}
		seen[spec.Config] = i
		s.Comparisons = append(s.Comparisons, spec)
	}
	return s, errors.Join(errs...)
}

// parseCompareSpec parses one comparison; its problems name their fields.
func parseCompareSpec(raw json.RawMessage, dir string) (CompareSpec, []string) {
	var problems []string
	var j compareSpecJSON
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return CompareSpec{}, []string{fmt.Sprintf("want an object with Config, Protocols, Overload, ProbeFrom, ProbeFactor, ProbeMax and ProbeStepSeconds: %v", err)}
	}
	spec := CompareSpec{
		Protocols: j.Protocols, ProbeFrom: DefaultProbeFrom, ProbeFactor: DefaultProbeFactor,
		ProbeMax: DefaultProbeMax, ProbeStepSeconds: DefaultProbeStepSec,
	}
	if strings.TrimSpace(j.Config) == "" {
		problems = append(problems, `"Config" is required: the path of an experiment config, relative to the suite file`)
	} else {
		spec.Config = j.Config
		if !filepath.IsAbs(spec.Config) {
			spec.Config = filepath.Join(dir, spec.Config)
		}
		if _, err := os.Stat(spec.Config); err != nil {
			problems = append(problems, fmt.Sprintf(`"Config" %q: %v`, j.Config, err))
		}
	}
	if len(spec.Protocols) == 0 {
		spec.Protocols = CompareVariants
	} else if _, err := ParseVariants(strings.Join(spec.Protocols, ",")); err != nil {
		problems = append(problems, fmt.Sprintf(`"Protocols": %v`, err))
	}
	if j.Overload != nil {
		spec.Overload = *j.Overload
		if spec.Overload != 0 && !(spec.Overload >= 1 && spec.Overload <= 3) {
			problems = append(problems, fmt.Sprintf(`"Overload" %v: want a multiple of the probed rate from 1.0 to 3.0, or 0 to run at the config's rate`, spec.Overload))
		}
	}
	if j.ProbeFrom != nil {
		spec.ProbeFrom = *j.ProbeFrom
	}
	if j.ProbeFactor != nil {
		spec.ProbeFactor = *j.ProbeFactor
	}
	if j.ProbeMax != nil {
		spec.ProbeMax = *j.ProbeMax
	}
	if j.ProbeStepSeconds != nil {
		spec.ProbeStepSeconds = *j.ProbeStepSeconds
	}
	switch {
	case spec.ProbeFrom < 1:
		problems = append(problems, fmt.Sprintf(`"ProbeFrom" %d: want a rate of at least 1 event/s`, spec.ProbeFrom))
	case spec.ProbeMax < spec.ProbeFrom:
		problems = append(problems, fmt.Sprintf(`"ProbeMax" %d: want at least "ProbeFrom" (%d)`, spec.ProbeMax, spec.ProbeFrom))
	}
	if !(spec.ProbeFactor > 1) {
		problems = append(problems, fmt.Sprintf(`"ProbeFactor" %v: want a rate multiple per step above 1`, spec.ProbeFactor))
	}
	if spec.ProbeStepSeconds < 3 {
		problems = append(problems, fmt.Sprintf(`"ProbeStepSeconds" %d: want at least 3 s per step`, spec.ProbeStepSeconds))
	}
	if spec.Overload == 0 && (j.ProbeFrom != nil || j.ProbeMax != nil || j.ProbeFactor != nil || j.ProbeStepSeconds != nil) {
		problems = append(problems, `probe fields are set but "Overload" is 0 or absent, so no probe runs: set "Overload" (1.0-3.0) or drop them`)
	}
	return spec, problems
}

// ArtifactKeyword is the result keyword the artifact's suites give a
// protocol's run (lazy, SAR, DRRS, Remote), so its figure scripts' run
// names (<QueryName>_<keyword>) find the comparison suite's runs.
func ArtifactKeyword(variant string) string {
	switch variant {
	case VariantStopAndRestart:
		return "SAR"
	case VariantDRRS:
		return "DRRS"
	case VariantRemote:
		return "Remote"
	}
	return variant
}

// CompareSuiteInputs maps each run a comparison suite makes (RunKey of the
// config's experiment name and the protocol's ArtifactKeyword) to its
// input, for the figures (state sizes, query names). Rates are the
// configs', not the probed ones.
func CompareSuiteInputs(s CompareSuite) (map[string]*workflows.ExperimentInput, error) {
	out := map[string]*workflows.ExperimentInput{}
	var errs []error
	names := map[string]string{}
	for _, c := range s.Comparisons {
		base, err := LoadConfig(c.Config)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := names[base.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: experiment %q is also the experiment of %s: the figures could not tell their runs apart (give one another \"Experiment\")", c.Config, base.Name, other))
			continue
		}
		names[base.Name] = c.Config
		for _, v := range c.Protocols {
			in, _, err := VariantInput(base, v, "")
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[RunKey(in.Name, ArtifactKeyword(v))] = &in
		}
	}
	return out, errors.Join(errs...)
}
