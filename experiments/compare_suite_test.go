package experiments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseCompareSuite(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "q.json")
	data, err := os.ReadFile("suites/smoke/counter_2to4_lazy.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg, data, 0o644))
	var other map[string]any
	require.NoError(t, json.Unmarshal(data, &other))
	other["Experiment"] = "another"
	data2, err := json.Marshal(other)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "q2.json"), data2, 0o644))
	path := filepath.Join(dir, "s.json")

	s, err := ParseCompareSuite(path, []byte(`{"Name": "x", "Comparisons": [
		{"Config": "q.json"},
		{"Config": "q2.json", "Protocols": ["lazy", "remote"], "Overload": 1.3, "ProbeFrom": 1000, "ProbeMax": 9000}]}`))
	require.NoError(t, err)
	require.Equal(t, "x", s.Name)
	require.Equal(t, DefaultFigures, s.Figures)
	require.Len(t, s.Comparisons, 2)
	first := s.Comparisons[0]
	require.Equal(t, cfg, first.Config, "config paths are relative to the suite file")
	require.Equal(t, CompareVariants, first.Protocols)
	require.Zero(t, first.Overload)
	second := s.Comparisons[1]
	require.Equal(t, []string{"lazy", "remote"}, second.Protocols)
	require.Equal(t, 1.3, second.Overload)
	require.Equal(t, 1000, second.ProbeFrom)
	require.Equal(t, 9000, second.ProbeMax)
	require.Equal(t, DefaultProbeFactor, second.ProbeFactor, "absent probe fields take compare's defaults")
	require.Equal(t, DefaultProbeStepSec, second.ProbeStepSeconds)

	in, err := CompareSuiteInputs(s)
	require.NoError(t, err)
	require.Len(t, in, 4+2, "one input per protocol run of each comparison")
	base, err := LoadConfig(cfg)
	require.NoError(t, err)
	for _, kw := range []string{"lazy", "SAR", "DRRS", "Remote"} {
		require.Contains(t, in, RunKey(base.Name, kw), kw)
	}
	require.Equal(t, "remote-pebble", in[RunKey(base.Name, "Remote")].StateBackend)
	require.Contains(t, in, RunKey("another", "Remote"))

	// Two configs of one experiment name: their runs could not be told
	// apart in the figures.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "q3.json"), data, 0o644))
	s, err = ParseCompareSuite(path, []byte(`{"Comparisons": [{"Config": "q.json"}, {"Config": "q3.json"}]}`))
	require.NoError(t, err)
	_, err = CompareSuiteInputs(s)
	require.ErrorContains(t, err, "could not tell their runs apart")

	require.True(t, IsCompareSuite([]byte(`{"Comparisons": []}`)))
	require.False(t, IsCompareSuite([]byte(`{"Experiments": []}`)))
	require.False(t, IsCompareSuite([]byte(`not json`)))
}

// Every bad comparison suite is refused with an error naming the field
// and what it allows; all problems of a file come at once.
func TestParseCompareSuite_BadInput(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("suites/smoke/counter_2to4_lazy.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "q.json"), data, 0o644))
	path := filepath.Join(dir, "s.json")
	for _, c := range []struct {
		name, suite string
		want        []string
	}{
		{"not an object", `[]`, []string{"want a JSON object"}},
		{"unknown top field", `{"Comparisons": [{"Config": "q.json"}], "Experiment": []}`, []string{`unknown field "Experiment"`}},
		{"empty", `{"Comparisons": []}`, []string{`"Comparisons" is empty`}},
		{"not a list", `{"Comparisons": {}}`, []string{`"Comparisons" must be a list`}},
		{"empty name", `{"Name": " ", "Comparisons": [{"Config": "q.json"}]}`, []string{`"Name" must be a non-empty string`}},
		{"bad figure", `{"Figures": ["99"], "Comparisons": [{"Config": "q.json"}]}`, []string{"99"}},
		{"no config", `{"Comparisons": [{"Protocols": ["lazy"]}]}`, []string{`Comparisons[0]: "Config" is required`}},
		{"missing config", `{"Comparisons": [{"Config": "nope.json"}]}`, []string{`Comparisons[0]: "Config" "nope.json"`}},
		{"unknown protocol", `{"Comparisons": [{"Config": "q.json", "Protocols": ["lazy", "eager"]}]}`, []string{`"Protocols"`, `"eager"`}},
		{"unknown entry field", `{"Comparisons": [{"Config": "q.json", "Overlaod": 1.3}]}`, []string{`Comparisons[0]`, "Overlaod"}},
		{"overload out of range", `{"Comparisons": [{"Config": "q.json", "Overload": 5}]}`, []string{`"Overload" 5`, "1.0 to 3.0"}},
		{"probe without overload", `{"Comparisons": [{"Config": "q.json", "ProbeMax": 9000}]}`, []string{`"Overload" is 0 or absent`}},
		{"probe max below from", `{"Comparisons": [{"Config": "q.json", "Overload": 1.3, "ProbeFrom": 9000, "ProbeMax": 100}]}`, []string{`"ProbeMax" 100`}},
		{"probe factor", `{"Comparisons": [{"Config": "q.json", "Overload": 1.3, "ProbeFactor": 1}]}`, []string{`"ProbeFactor" 1`}},
		{"probe step", `{"Comparisons": [{"Config": "q.json", "Overload": 1.3, "ProbeStepSeconds": 1}]}`, []string{`"ProbeStepSeconds" 1`}},
		{"same config twice", `{"Comparisons": [{"Config": "q.json"}, {"Config": "q.json"}]}`, []string{`Comparisons[1]: "Config"`, "already compared in Comparisons[0]"}},
		{"all at once", `{"Comparisons": [{"Config": "nope.json"}, {"Config": "q.json", "Overload": 9}]}`, []string{`Comparisons[0]`, `Comparisons[1]: "Overload" 9`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseCompareSuite(path, []byte(c.suite))
			require.Error(t, err)
			for _, w := range c.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestCompareSuiteTable(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	row := func(protocol string, minRatio, worstMs float64, over int, drained *float64) CompareRow {
		r := CompareRow{Protocol: protocol, Status: StatusOK}
		r.PreThroughput, r.PreMinThroughput, r.MinRatio = f(1000), f(700), f(minRatio)
		r.TriggerP99 = &TriggerP99{WorstUs: worstMs * 1000, Seconds: 31, Over: over}
		r.PeakLag = f(60000)
		r.Backlog = &Backlog{AtTrigger: f(50000), StopsGrowingSec: f(5), DrainedSec: drained, DrainLag: 5000, LeftAtEnd: f(27500), HorizonSec: f(60)}
		return r
	}
	cmps := []Comparison{
		{Experiment: "q-met", Load: &OfferedLoad{Rate: 13000, Sustainable: 10000, StateBytes: 2_300_000_000}, Rows: []CompareRow{
			row(VariantLazy, 0.95, 40, 0, f(10)), row(VariantStopAndRestart, 0, 50, 3, nil),
			row(VariantDRRS, 0.2, 60, 1, f(45)), row(VariantRemote, 0.8, 70, 0, nil),
		}},
		{Experiment: "q-missed", Rows: []CompareRow{
			row(VariantLazy, 0.5, 80, 2, f(30)), row(VariantStopAndRestart, 0, 50, 3, f(45)),
			row(VariantRemote, 0.8, 70, 0, nil),
		}},
		{Experiment: "q-failed", Rows: []CompareRow{{Protocol: VariantLazy, Status: StatusFailed}}},
		{Experiment: "q-nothreshold", Rows: []CompareRow{
			row(VariantLazy, 0.9, 40, 0, nil), row(VariantStopAndRestart, 0, 50, 3, nil),
		}},
	}
	// Overloaded from the start with no probe: no drain threshold.
	for i := range cmps[3].Rows {
		cmps[3].Rows[i].Backlog.DrainLag, cmps[3].Rows[i].Backlog.Note = 0, BacklogNoThreshold
	}
	cmps[0].Rows[0].HostCPU = &HostCPUFigures{CPUs: 2, Pre: f(1.5), After: f(1.96)}
	got := CompareSuiteTable(cmps)
	lines := strings.Split(got, "\n")
	require.Contains(t, lines[2], "| q-met | 2.30 GB | 13000 ev/s (10000) | 50000 | 0.95 (0.70) met | 0/31 met | 40.0 / 70.0 ms met | +10 s / no / +45 s / no | > 6.0× (S&R not drained by +60 s) met | 11.0 / 0.6 / 1.4 | 1.50 / 1.96 of 2 |")
	require.Contains(t, lines[3], "| q-missed | — | config's rate | 50000 | 0.50 (0.70) missed | 2/31 missed | 80.0 / 70.0 ms missed | +30 s / +45 s / — / no | 1.5× not shown | 2.2 / 1.4 / — | not measured |")
	require.Contains(t, lines[4], "| q-failed | — | config's rate | no lazy run |")
	require.Contains(t, lines[5], "| q-nothreshold | — | config's rate | 50000 | 0.90 (0.70) met | 0/31 met | 40.0 ms / no remote run |")
	require.Contains(t, lines[5], "| no threshold / no threshold / — / — | no drain threshold: not measured |")
}
