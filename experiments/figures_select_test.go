package experiments

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSuiteFigures(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	for _, tc := range []struct {
		name, body string
		want       []string
		wantErr    string
	}{
		{"default", `{"Name": "x", "Experiments": []}`, DefaultFigures, ""},
		{"listed", `{"Name": "x", "Figures": ["10", "12"], "Experiments": []}`, []string{"10", "12"}, ""},
		{"unknown", `{"Name": "x", "Figures": ["7"], "Experiments": []}`, nil, `Figures[0] "7" is not a figure koala draws`},
		{"repeated", `{"Name": "x", "Figures": ["10", "10"], "Experiments": []}`, nil, `Figures[1] "10" is listed twice`},
		{"not strings", `{"Name": "x", "Figures": [10], "Experiments": []}`, nil, `"Figures" must be a list of figure numbers as strings`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SuiteFigures(write(tc.name+".json", tc.body))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// The checked-in section 5.3 and 5.4 suites load, ask for their figures
// and stay within the scaled run time.
func TestLoadSuite_Sections53And54(t *testing.T) {
	for _, tc := range []struct {
		file    string
		figures []string
		maxSecs int
	}{
		{"suites/section5_3.json", []string{"10", "11", "12", "13"}, 30 * 60},
		{"suites/section5_4.json", []string{"14", "15", "16"}, 30 * 60},
		{"suites/section5_4_warmup.json", DefaultFigures, 30 * 60},
	} {
		s, err := LoadSuite(tc.file)
		require.NoError(t, err, tc.file)
		require.Equal(t, tc.figures, s.Figures, tc.file)
		total := 0
		for _, e := range s.Input.Entries {
			if e.Keyword == "two_operators_lazy" {
				// Fig 13: both stateful operators of one query rescaled at
				// the same trigger time.
				require.Equal(t, "two-counters", e.Input.QueryName)
				rs := e.Input.Reconfigurations
				require.Len(t, rs, 2)
				require.Equal(t, rs[0].TriggerTimeSeconds, rs[1].TriggerTimeSeconds)
				require.ElementsMatch(t, []string{"counter", "groupsum"}, []string{rs[0].TargetOperator, rs[1].TargetOperator})
			} else if strings.HasPrefix(tc.file, "suites/section5_4") {
				// Section 5.4 runs on Nexmark q6* with closing-auction
				// streams: sequential sellers to warm up, the artifact's
				// resume point (46 × NumEvents) to measure.
				require.Equal(t, "nexmark_query6", e.Input.QueryName, e.Keyword)
				require.NoError(t, CheckQuery(e.Input), e.Keyword)
				require.NotNil(t, e.Input.Producer.Nexmark, e.Keyword)
				numEvents, err := strconv.ParseInt(e.Input.Params["NumEvents"], 10, 64)
				require.NoError(t, err, e.Keyword)
				if e.Input.Params["IsWarmUp"] == "true" {
					require.Equal(t, "sequential", e.Input.Producer.Nexmark.Sellers, e.Keyword)
				} else {
					require.Equal(t, "true", e.Input.Params["LoadWarmUpData"], e.Keyword)
					require.Contains(t, []string{"uniform", "zipf"}, e.Input.Producer.Nexmark.Sellers, e.Keyword)
					require.Equal(t, 46*numEvents, e.Input.Producer.Nexmark.OutputEventNumber, e.Keyword)
					require.Len(t, e.Input.Reconfigurations, 1, e.Keyword)
					require.Equal(t, "q6-average", e.Input.Reconfigurations[0].TargetOperator, e.Keyword)
					require.Equal(t, 4, e.Input.Reconfigurations[0].TargetParallelism, e.Keyword)
					require.Equal(t, 2, e.Input.Parallelism["q6-average"], e.Keyword)
					require.Equal(t, "lazy", e.Input.ReconfigProtocol, e.Keyword)
					// The measurement's producer must not hit the NumEvents bound.
					require.LessOrEqual(t, int64(e.Input.Producer.RatePerSec*e.Input.TotalRuntimeSeconds), numEvents, e.Keyword)
				}
			} else {
				require.Equal(t, "counter", e.Input.QueryName, e.Keyword)
			}
			total += e.Input.TotalRuntimeSeconds + 40 // deploy, drain and metrics per run
		}
		require.LessOrEqual(t, total, tc.maxSecs, "%s: %d s of runs", tc.file, total)
	}
}
