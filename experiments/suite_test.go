package experiments

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"koala/dataplane/control"
	"koala/workflows"
)

func TestLoadSuite_CheckedInSuites(t *testing.T) {
	for _, f := range []string{"suites/smoke.json", "suites/section5_2.json"} {
		s, err := LoadSuite(f)
		require.NoError(t, err, f)
		require.NotEmpty(t, s.Input.Entries)
		require.Equal(t, s.Name, s.Input.Name)
		for _, e := range s.Input.Entries {
			require.Equal(t, "counter", e.Input.QueryName)
			require.LessOrEqual(t, e.Input.TotalRuntimeSeconds, 120)
		}
	}
	s, err := LoadSuite("suites/section5_2.json")
	require.NoError(t, err)
	require.Equal(t, "counter_100kKeys", s.Input.Entries[0].Input.Name)
	require.Equal(t, "lazy_100kKeys", s.Input.Entries[0].Keyword)
	require.Equal(t, workflows.ProtocolDRRS, s.Input.Entries[2].Input.ReconfigProtocol)
}

func writeSuite(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	cfg, err := os.ReadFile("suites/smoke/counter_2to4_lazy.json")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "c"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c", "ok.json"), cfg, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c", "bad.json"), []byte(`{"QueryName": "counter", "TotalRuntimeSecond": 5}`), 0o644))
	p := filepath.Join(dir, "suite.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

func TestLoadSuite_Errors(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
	}{
		{"unknown top field", `{"Name": "x", "Experiment": [{"Config": "c/ok.json", "Keyword": "a"}]}`,
			[]string{`unknown field "Experiment" (did you mean "Experiments"?)`, `"Experiments" is required`}},
		{"unknown entry field", `{"Name": "x", "Experiments": [{"Config": "c/ok.json", "Keywrd": "a"}]}`,
			[]string{`Experiments[0]: unknown field "Keywrd" (did you mean "Keyword"?)`, `Experiments[0]: "Keyword" is required`}},
		{"missing config", `{"Name": "x", "Experiments": [{"Config": "c/nope.json", "Keyword": "a"}]}`,
			[]string{`Experiments[0].Config: config file`, `nope.json does not exist`}},
		{"bad config", `{"Name": "x", "Experiments": [{"Config": "c/bad.json", "Keyword": "a"}]}`,
			[]string{`Experiments[0].Config:`, `TotalRuntimeSecond`, `did you mean "TotalRuntimeSeconds"`}},
		{"duplicate keyword", `{"Name": "x", "Experiments": [{"Config": "c/ok.json", "Keyword": "a"}, {"Config": "c/ok.json", "Keyword": "a"}]}`,
			[]string{`Experiments[1].Keyword "a" is already used by Experiments[0]`}},
		{"empty", `{"Name": "", "Experiments": []}`, []string{`"Name" must be a non-empty string`, `"Experiments" is empty`}},
		{"not an object", `[1]`, []string{"want a JSON object"}},
		{"syntax", `{"Name": `, []string{"not valid JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeSuite(t, c.body)
			_, err := LoadSuite(p)
			require.Error(t, err)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
			require.Contains(t, err.Error(), p, "errors name the suite file")
		})
	}
	_, err := LoadSuite(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorContains(t, err, "missing.json")
}

func TestLoadSuite_RelativeConfigs(t *testing.T) {
	p := writeSuite(t, `{"Name": "x", "Experiments": [{"Config": "c/ok.json", "Keyword": "a"}]}`)
	s, err := LoadSuite(p)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(filepath.Dir(p), "c", "ok.json"), s.Entries[0].Path)
	require.Equal(t, "a", s.Input.Entries[0].Keyword)
}

func TestSuiteSummary_TableAndRoundTrip(t *testing.T) {
	s := SuiteSummary{
		Suite: "smoke", WorkflowID: "suite-smoke-1", Started: time.Unix(0, 0).UTC(),
		Entries: []workflows.SuiteEntryResult{
			{Index: 1, Keyword: "lazy", Experiment: "counter_2to4", Status: workflows.SuiteSucceeded, Seconds: 65.2},
			{Index: 2, Keyword: "drrs", Experiment: "counter_2to4", Status: workflows.SuiteFailed, Seconds: 12, Error: "worker\nw2 gone"},
		},
		LogsDir: "/r/suite_1", ResultsDir: "/r",
	}
	var b bytes.Buffer
	require.NoError(t, WriteSuiteTable(&b, s))
	want := strings.Repeat("=", 60) + "\nSuite summary\n" + strings.Repeat("=", 60) + "\n" +
		"SUCCEEDED    65s counter_2to4 -> lazy  (lost=0 duplicated=0 reordered=0)\n" +
		"FAILED       12s counter_2to4 -> drrs: worker w2 gone\n" +
		"Logs: /r/suite_1\nResults: /r\n"
	require.Equal(t, want, b.String())

	dir := t.TempDir()
	_, err := WriteSuiteSummary(dir, s)
	require.NoError(t, err)
	got, err := ReadSuiteSummary(dir)
	require.NoError(t, err)
	require.Equal(t, s, got)
	_, err = ReadSuiteSummary(t.TempDir())
	require.ErrorContains(t, err, "koala suite")
}

// Every checked-in suite loads as `koala suite --check` loads it, and each
// config in a suite directory that no suite names is a valid config too
// (the GB-scale warm-ups are run by `koala warmup`, not by a suite).
func TestLoadSuite_EveryCheckedInSuite(t *testing.T) {
	suites, err := filepath.Glob("suites/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, suites)
	for _, f := range suites {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if IsCompareSuite(data) {
			cs, err := ParseCompareSuite(f, data)
			require.NoError(t, err, f)
			require.NotEmpty(t, cs.Comparisons, f)
			in, err := CompareSuiteInputs(cs)
			require.NoError(t, err, f)
			runs := 0
			for _, c := range cs.Comparisons {
				require.NotEmpty(t, c.Protocols, f)
				runs += len(c.Protocols)
			}
			require.Len(t, in, runs, f)
			continue
		}
		s, err := LoadSuiteFor(f, RunOptions{})
		require.NoError(t, err, f)
		require.NotEmpty(t, s.Input.Entries, f)
	}
	configs, err := filepath.Glob("suites/section5_4_gb/*.json")
	require.NoError(t, err)
	require.Len(t, configs, 15, "4 warm-ups, 4 state sizes, 4 active key spaces, 3 skews")
	for _, f := range configs {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		in, _, err := ParseConfigNotes(f, data)
		require.NoError(t, err, f)
		require.Equal(t, "nexmark_query6_modified", in.QueryName, f)
	}
}

// The GB-scale comparisons (`koala compare`) are no suite's entries, so
// nothing else parses them: every config there is valid, and every one
// that loads a warm-up snapshot has the warm-up config beside it that
// builds that snapshot (compare builds a missing snapshot from it).
func TestGBComparisonConfigs(t *testing.T) {
	for _, dir := range []string{"suites/section5_2_gb", "suites/overload"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		builds := map[string]string{} // snapshot dir → warm-up config
		loads := map[string]string{}  // measurement config → snapshot dir
		for _, f := range files {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			in, _, err := ParseConfigNotes(f, data)
			require.NoError(t, err, f)
			snap := in.Params[control.ParamWarmUpSnapshotDir]
			switch {
			case in.Params[control.ParamIsWarmUp] == "true":
				require.NotEmpty(t, snap, f)
				builds[snap] = f
			case in.Params[control.ParamLoadWarmUpData] == "true":
				require.NotEmpty(t, snap, f)
				loads[f] = snap
			}
		}
		require.NotEmpty(t, loads, dir)
		for f, snap := range loads {
			require.Contains(t, builds, snap, "%s loads %s, which no warm-up config in %s builds", f, snap, dir)
		}
	}
}
