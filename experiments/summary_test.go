package experiments

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koala/dataplane/metrics"
)

// The -update flag rewrites golden files. It is registered in init (after all
// package-level variables) so that another test file of this package may
// register the same flag name first.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

func TestSummaryWriteTextGolden(t *testing.T) {
	s := Summary{
		Experiment: "q1-rescale-koala", WorkflowID: "experiment-q1-rescale-koala", RunID: "0f3c9a52-run",
		UIURL:    "http://127.0.0.1:8233/namespaces/default/workflows/experiment-q1-rescale-koala/0f3c9a52-run/history",
		Produced: 180000, SinkReceived: 180000, SinkDistinct: 180000,
		ThroughputBefore: 2000, MinThroughputDuring: 1523.5, ThroughputAfter: 1999.25,
		Reconfigs: []ReconfigSummary{
			{ID: "r1", Protocol: "koala", Millis: 1234.56, Steps: []StepSummary{
				{Step: "plan", Millis: 3.2}, {Step: "update-routing", Millis: 41}, {Step: "migrate-state", Millis: 1190.36},
			}},
			{ID: "r2-scale-in", Protocol: "stop-restart", Millis: 8000, Steps: []StepSummary{{Step: "stop", Millis: 500}}},
		},
		Elapsed:  92*time.Second + 512345*time.Microsecond,
		PlotPath: "results/q1-rescale-koala/throughput.png",
	}
	var buf bytes.Buffer
	if err := s.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "summary.golden")
	if updateGolden() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update)", err)
	}
	if got := buf.String(); got != string(want) {
		t.Errorf("WriteText mismatch (go test -update to accept)\n--- got\n%s--- want\n%s", got, want)
	}
}

func TestSummaryWriteTextMinimal(t *testing.T) {
	var buf bytes.Buffer
	if err := (Summary{Lost: 3, Duplicated: 1, ThroughputBefore: math.NaN()}).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"experiment   -\n" +
		"workflow     -\n" +
		"run          -\n" +
		"elapsed      0s\n" +
		"records      produced 0, sink received 0, distinct 0\n" +
		"throughput   before n/a, min during 0.0 ev/s, after 0.0 ev/s\n" +
		"reconfigs    none\n" +
		"lost=3 duplicated=1 reordered=0\n" +
		"ui: -\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestSummaryWriteTextUnchecked(t *testing.T) {
	var buf bytes.Buffer
	if err := (Summary{Produced: 10, SinkReceived: 2, ExactnessUnchecked: "it aggregates"}).WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	want := "lost=n/a duplicated=n/a reordered=n/a (not checked at run time: it aggregates)\n"
	if !strings.Contains(buf.String(), want) || strings.Contains(buf.String(), "lost=0") {
		t.Errorf("got\n%s\nwant a line %q and no lost=0", buf.String(), want)
	}
}

// series builds one point per second from 0 with the given values.
func series(vals ...float64) []metrics.Point {
	pts := make([]metrics.Point, len(vals))
	for i, v := range vals {
		pts[i] = metrics.Point{Sec: float64(i), Value: v}
	}
	return pts
}

func TestThroughputWindows(t *testing.T) {
	cases := []struct {
		name                  string
		pts                   []metrics.Point
		start, end            float64
		before, during, after float64
	}{
		{
			name: "warm-up and last second ignored",
			//            0  1  2    3    4    5   6   7    8    9    10
			pts:   series(1, 1, 100, 100, 100, 50, 20, 100, 110, 120, 5),
			start: 5, end: 7,
			before: 100, during: 20, after: 110,
		},
		{
			name:  "fractional interval uses seconds that overlap it",
			pts:   series(0, 0, 10, 20, 30, 5, 40, 40, 40, 40, 1),
			start: 4.5, end: 5.2,
			// before: seconds 2,3 end by 4.5; during: 4 and 5 overlap; after: 6..9
			before: 15, during: 5, after: 40,
		},
		{
			name:  "instant reconfiguration takes the second containing it",
			pts:   series(0, 0, 10, 10, 3, 10, 10, 0),
			start: 4.2, end: 4.2,
			before: 10, during: 3, after: 10,
		},
		{
			name:  "unsorted input, non-finite points dropped",
			pts:   []metrics.Point{{Sec: 6, Value: 9}, {Sec: 3, Value: 4}, {Sec: 2, Value: 2}, {Sec: 0, Value: 1}, {Sec: 4, Value: 1}, {Sec: 5, Value: 8}, {Sec: 7, Value: 0}, {Sec: 1, Value: math.NaN()}},
			start: 4, end: 5,
			before: 3, during: 1, after: 8.5,
		},
		{
			name:  "series starts late: warm-up is relative to its first point",
			pts:   []metrics.Point{{Sec: 10, Value: 1}, {Sec: 11, Value: 1}, {Sec: 12, Value: 7}, {Sec: 13, Value: 9}, {Sec: 14, Value: 2}, {Sec: 15, Value: 6}, {Sec: 16, Value: 0}},
			start: 14, end: 15,
			before: 8, during: 2, after: 6,
		},
		{
			name:  "empty windows yield zero",
			pts:   series(5, 5, 5),
			start: 1, end: 100,
			before: 0, during: 5, after: 0,
		},
		{name: "no points", start: 1, end: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, d, a := ThroughputWindows(c.pts, c.start, c.end)
			if b != c.before || d != c.during || a != c.after {
				t.Errorf("got before=%v during=%v after=%v, want %v %v %v", b, d, a, c.before, c.during, c.after)
			}
		})
	}
}
