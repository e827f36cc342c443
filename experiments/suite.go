package experiments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"koala/workflows"
)

// A suite file lists experiment configs in the order they run, each with a
// keyword naming the variant. koala's own form:
//
//	{"Name": "section5_2", "Experiments": [
//	  {"Config": "section5_2/counter_100kKeys.json", "Keyword": "lazy_100kKeys"}, ...]}
//
// and the artifact's (its runExperimentSuite.py's) are both read:
//
//	{"WorkDir": "...", "CooldownSeconds": 30, "MaxAttempts": 2, "RetryDelaySeconds": 60,
//	 "StopOnFailure": false, "GitFetch": false, "RestoreBranch": true,
//	 "Experiments": [{"Name": "...", "Branch": "main",
//	   "ConfigPath": "nexmarkJson/aws/query6/x.json", "ResultKeyword": "multi_reconfig"}, ...]}
//
// ConfigPath is Config and ResultKeyword is Keyword (the result label);
// the suite's name defaults to the file's base name. CooldownSeconds (the
// pause between experiments), MaxAttempts (runs of a failed experiment,
// suite-wide or per entry), RetryDelaySeconds and StopOnFailure are run by
// the RunSuite workflow; an entry with "Skip": true is left out. WorkDir,
// GitFetch, RestoreBranch, Branch, KeepFailedResults and _comment are
// accepted and noted: every protocol lives in this one tree, so there is
// no branch to switch to, and every result is kept. An entry's config that
// is not in the tree is read from its Branch when the suite lies in a git
// checkout that has it (suite_git.go); an entry whose warm-up snapshot is
// not built yet gets its warm-up run first (suite_warmup.go).
//
// A config path is looked up relative to the suite file's directory and
// then to each directory above it: the artifact's paths are relative to
// its scripts/ directory, several levels up from its fullSuite.json files.
var (
	suiteFields = []string{"Name", "Experiments", "Figures", "_comment", "WorkDir", "CooldownSeconds", "MaxAttempts",
		"RetryDelaySeconds", "StopOnFailure", "GitFetch", "RestoreBranch", "KeepFailedResults"}
	suiteEntryFields = []string{"Config", "ConfigPath", "Keyword", "ResultKeyword", "Name", "Branch", "CooldownSeconds", "MaxAttempts", "Skip"}
)

// Defaults of the suite settings (the artifact's but the cool-down, which
// koala's own suites never had).
const (
	DefaultSuiteRetryDelaySeconds = 60
	maxSuiteSeconds               = 7 * 24 * 3600
	maxSuiteAttempts              = 100
)

// SuiteFileEntry is one experiment of a suite file.
type SuiteFileEntry struct {
	Config  string // as written in the file
	Path    string // resolved (see the comment at the top)
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
	// Notes are the suite's and its configs' notes (ParseConfigNotes).
	Notes []string
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
	return parseSuite(path, data, Scale{}, func(src configSource) (loadedConfig, error) {
		in, notes, err := ParseConfigNotes(src.path, src.data)
		return loadedConfig{in: in, notes: notes}, err
	})
}

// LoadSuiteFor is LoadSuite preparing every config to run with o
// (PrepareConfig): what `koala suite` and `koala suite --check` do.
func LoadSuiteFor(path string, o RunOptions) (Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Suite{}, fmt.Errorf("suite: %w", err)
	}
	o.builtBefore = map[string]string{}
	return parseSuite(path, data, o.Scale, func(src configSource) (loadedConfig, error) {
		return prepareEntry(src, o)
	})
}

// ParseSuite parses suite file data (named path, which also anchors relative
// config paths) and loads each config with load.
func ParseSuite(path string, data []byte, load func(string) (workflows.ExperimentInput, error)) (Suite, error) {
	return parseSuite(path, data, Scale{}, func(src configSource) (loadedConfig, error) {
		in, err := load(src.path)
		return loadedConfig{in: in}, err
	})
}

// configSource is a suite entry's config: a file in the tree, or one read
// from a git branch (siblings then lists the files beside it there).
type configSource struct {
	configFile
	siblings func() []configFile
}

// loadedConfig is a suite entry's config loaded, with the warm-ups the
// suite runs before it (suite_warmup.go).
type loadedConfig struct {
	in      workflows.ExperimentInput
	notes   []string
	warmUps []loadedWarmUp
}

func parseSuite(path string, data []byte, scale Scale, load func(configSource) (loadedConfig, error)) (Suite, error) {
	s := Suite{File: path}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	note := func(format string, args ...any) {
		s.Notes = append(s.Notes, fmt.Sprintf("suite %s: "+format, append([]any{path}, args...)...))
	}
	top, err := strictObject(data, suiteFields)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range top.unknown {
		fail("unknown field %q%s", k, suggest(k, suiteFields))
	}
	s.Name, s.Figures = suiteNameAndFigures(top, path, fail)
	set := suiteSettings(top.fields, "", fail, note)
	s.Input.RetryDelaySeconds = int(scaleInt(int64(set.retryDelay), scale.time()))
	s.Input.StopOnFailure = set.stopOnFailure

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
	var branches []string
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
		var name, branch string
		configField := pick(obj.fields, "Config", "ConfigPath", at, fail)
		keywordField := pick(obj.fields, "Keyword", "ResultKeyword", at, fail)
		for _, f := range []struct {
			name     string
			dst      *string
			required bool
		}{{configField, &e.Config, true}, {keywordField, &e.Keyword, true}, {"Name", &name, false}, {"Branch", &branch, false}} {
			raw, ok := obj.fields[f.name]
			if !ok {
				if f.required {
					fail("%s: %q is required", at, f.name)
				}
				continue
			}
			if err := json.Unmarshal(raw, f.dst); err != nil || strings.TrimSpace(*f.dst) == "" {
				fail("%s.%s must be a non-empty string, got %s", at, f.name, compact(raw))
			}
		}
		es := suiteSettings(obj.fields, at+".", fail, note)
		if es.skip {
			note("%s (%s): Skip is true; left out", at, orText(name, e.Config))
			continue
		}
		if branch != "" && !slices.Contains(branches, branch) {
			branches = append(branches, branch)
		}
		if e.Keyword != "" && keywordField == "Keyword" {
			if j, dup := seen[e.Keyword]; dup {
				fail("%s.%s %q is already used by Experiments[%d]", at, keywordField, e.Keyword, j)
			}
			seen[e.Keyword] = i
		}
		if e.Config == "" {
			continue
		}
		src, err := locateConfig(dir, e.Config, branch)
		if err != nil {
			fail("%s.%s: %v", at, configField, err)
			continue
		}
		if src.siblings != nil {
			note("%s (%s): %s is not in the tree; read from branch %q of the git checkout (git show %s)", at, orText(name, e.Config), e.Config, branch, src.path)
		}
		e.Path = src.path
		l, err := load(src)
		in := l.in
		s.Notes = append(s.Notes, l.notes...)
		if err != nil {
			fail("%s.%s: %v", at, configField, err)
			continue
		}
		if name != "" {
			in.Name = name
		}
		if keywordField == "ResultKeyword" && e.Keyword != "" {
			// The artifact's results go to <query>_<ResultKeyword>, so
			// one keyword serves every query; a second run of one query
			// with one keyword only gets a timestamped folder there.
			label := orText(in.Params[ParamArtifactQueryName], in.QueryName) + "_" + e.Keyword
			if j, dup := seen[label]; dup {
				note("%s.ResultKeyword %q: Experiments[%d] has the same query and keyword (%s); both run, each with its own results", at, e.Keyword, j, label)
			}
			seen[label] = i
		}
		attempts := set.maxAttempts
		if es.maxAttemptsSet {
			attempts = es.maxAttempts
		}
		cooldown := set.cooldown
		if es.cooldownSet {
			cooldown = es.cooldown
		}
		for _, w := range l.warmUps {
			kw := warmUpKeyword(w.path, seen)
			seen[kw] = i
			note("%s (%s): loads the warm-up snapshot %s, which is not built yet; the suite runs its warm-up config %s first (keyword %s)", at, orText(name, e.Config), w.dir, w.path, kw)
			s.Entries = append(s.Entries, SuiteFileEntry{Config: w.path, Path: w.path, Keyword: kw})
			s.Input.Entries = append(s.Input.Entries, workflows.SuiteEntry{Keyword: kw, Input: w.in, MaxAttempts: attempts,
				CooldownSeconds: int(scaleInt(int64(cooldown), scale.time()))})
		}
		s.Entries = append(s.Entries, e)
		s.Input.Entries = append(s.Input.Entries, workflows.SuiteEntry{Keyword: e.Keyword, Input: in, MaxAttempts: attempts,
			CooldownSeconds: int(scaleInt(int64(cooldown), scale.time()))})
	}
	if len(branches) > 0 {
		note("Branch %s: every protocol lives in one tree here; no branch is checked out (a config missing from the tree is read from its entry's branch with git show)", strings.Join(branches, ", "))
	}
	if len(entries) > 0 && len(s.Input.Entries) == 0 && len(errs) == 0 {
		fail("every experiment is skipped (Skip true); nothing to run")
	}
	s.Input.Name = s.Name
	if len(errs) > 0 {
		return Suite{Notes: s.Notes}, errors.Join(errs...)
	}
	return s, nil
}

// pick returns which of two alias fields an object uses (the first when
// neither), reporting both.
func pick(fields map[string]json.RawMessage, a, b, at string, fail func(string, ...any)) string {
	_, hasA := fields[a]
	_, hasB := fields[b]
	switch {
	case hasA && hasB:
		fail("%s: %q and %q are the same field; give one", at, a, b)
	case hasB:
		return b
	}
	return a
}

// findConfig looks config up relative to dir and each directory above it
// (an absolute config as is); it returns the path found and where it
// looked.
func findConfig(dir, config string) (string, []string) {
	if filepath.IsAbs(config) {
		if _, err := os.Stat(config); err == nil {
			return config, nil
		}
		return "", []string{config}
	}
	var tried []string
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, config)
		tried = append(tried, p)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, tried
		}
		if filepath.Dir(d) == d || d == "." {
			return "", tried
		}
	}
}

// suiteSetting is the suite's (or one entry's) retry and pacing settings.
type suiteSetting struct {
	cooldown, maxAttempts, retryDelay int
	cooldownSet, maxAttemptsSet       bool
	stopOnFailure, skip               bool
}

// suiteSettings reads the settings among fields; prefix is "" for the
// suite's and "Experiments[i]." for an entry's. Fields without meaning
// here are noted.
func suiteSettings(fields map[string]json.RawMessage, prefix string, fail, note func(string, ...any)) suiteSetting {
	set := suiteSetting{maxAttempts: 1, retryDelay: DefaultSuiteRetryDelaySeconds}
	whole := func(name string, dst *int, lo, hi int) bool {
		raw, ok := fields[name]
		if !ok {
			return false
		}
		var v float64
		if kindOf(raw) != "number" || json.Unmarshal(raw, &v) != nil || v != float64(int(v)) || v < float64(lo) || v > float64(hi) {
			fail("%s%s: %s is out of range (a whole number between %d and %d)", prefix, name, compact(raw), lo, hi)
			return false
		}
		*dst = int(v)
		return true
	}
	boolean := func(name string, dst *bool) bool {
		raw, ok := fields[name]
		if !ok {
			return false
		}
		if kindOf(raw) != "boolean" {
			fail("%s%s: expected true or false, got %s", prefix, name, kindOf(raw))
			return false
		}
		*dst = strings.TrimSpace(string(raw)) == "true"
		return true
	}
	set.cooldownSet = whole("CooldownSeconds", &set.cooldown, 0, maxSuiteSeconds)
	set.maxAttemptsSet = whole("MaxAttempts", &set.maxAttempts, 1, maxSuiteAttempts)
	whole("RetryDelaySeconds", &set.retryDelay, 0, maxSuiteSeconds)
	boolean("StopOnFailure", &set.stopOnFailure)
	boolean("Skip", &set.skip)
	var flag bool
	for _, f := range []string{"GitFetch", "RestoreBranch"} {
		if boolean(f, &flag) {
			note("%s%s: every protocol lives in one tree here; no branch is fetched or restored", prefix, f)
		}
	}
	if boolean("KeepFailedResults", &flag) {
		note("%sKeepFailedResults: koala keeps every experiment's results, failed or not", prefix)
	}
	if raw, ok := fields["WorkDir"]; ok {
		var dir string
		if json.Unmarshal(raw, &dir) != nil {
			fail("%sWorkDir must be a string, got %s", prefix, kindOf(raw))
		} else {
			note("%sWorkDir %q: not used (the artifact's checkout on its hosts; configs are found relative to this suite file)", prefix, dir)
		}
	}
	if raw, ok := fields["_comment"]; ok {
		note("%s_comment: a comment (%d bytes); not used", prefix, len(compact(raw)))
	}
	return set
}

type jsonObject struct {
	fields  map[string]json.RawMessage
	unknown []string // in file order
}

// suiteNameAndFigures reads a suite file's "Name" (default: the file's
// base name) and "Figures" (default DefaultFigures), telling fail what is
// wrong with either.
func suiteNameAndFigures(top jsonObject, path string, fail func(format string, args ...any)) (string, []string) {
	name, figs := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)), DefaultFigures
	if raw, ok := top.fields["Name"]; ok {
		if err := json.Unmarshal(raw, &name); err != nil || strings.TrimSpace(name) == "" {
			fail(`"Name" must be a non-empty string, got %s`, compact(raw))
		}
	}
	if raw, ok := top.fields["Figures"]; ok {
		if err := json.Unmarshal(raw, &figs); err != nil {
			fail(`"Figures" must be a list of figure numbers as strings (e.g. ["10"]), got %s`, compact(raw))
		} else if err := CheckFigures(figs); err != nil {
			fail("%v", err)
		}
	}
	return name, figs
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
