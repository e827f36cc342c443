package bench

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/experiments"
)

func TestParsePhases(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{"all", BenchPhases, ""},
		{"ceilings, RSS", []string{PhaseCeilings, PhaseRSS}, ""},
		{"micro,,steady", []string{PhaseMicro, PhaseSteady}, ""},
		{"", nil, "empty"},
		{"steady,bogus", nil, `unknown phase "bogus"`},
		{"rss,rss", nil, "named twice"},
	} {
		got, err := ParsePhases(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParsePhases(%q) error = %v, want it to contain %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePhases(%q): %v", c.in, err)
			continue
		}
		var names []string
		for _, p := range BenchPhases {
			if got[p] {
				names = append(names, p)
			}
		}
		if !reflect.DeepEqual(names, c.want) || len(got) != len(c.want) {
			t.Errorf("ParsePhases(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// The bench's configs must load (a typo in a field name fails the config).
func TestBenchConfigsLoad(t *testing.T) {
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bench configs: %v", err)
	}
	for _, f := range files {
		if _, err := experiments.LoadConfig(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	in, err := experiments.LoadConfig("nexmark-q5-steady.json")
	if err != nil {
		t.Fatal(err)
	}
	if in.QueryName != "nexmark-q5" || in.Producer.Generator != "nexmark" {
		t.Errorf("q5 config: query %q generator %q", in.QueryName, in.Producer.Generator)
	}
}

func TestParseVmRSS(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"Name:\tkoala\nVmPeak:\t  900 kB\nVmRSS:\t  123456 kB\nRssAnon:\t 1 kB\n", 123456 * 1024, false},
		{"Name:\tkthreadd\nState:\tS\n", 0, true},
		{"VmRSS:\t12 MB\n", 0, true},
		{"VmRSS:\tx kB\n", 0, true},
	} {
		got, err := ParseVmRSS(c.in)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("ParseVmRSS(%q) = %d, %v; want %d, error %v", c.in, got, err, c.want, c.wantErr)
		}
	}
}

func rssSeries(mb func(i int) float64, n int) []RSSSample {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	out := make([]RSSSample, n)
	for i := range out {
		out[i] = RSSSample{At: t0.Add(time.Duration(i) * time.Second), Bytes: int64(mb(i) * (1 << 20))}
	}
	return out
}

func TestSummarizeRSS(t *testing.T) {
	// Growing early (warm-up), flat over the last half: met.
	flat := SummarizeRSS("w1", 1, rssSeries(func(i int) float64 {
		if i < 30 {
			return 100 + float64(i)
		}
		return 130
	}, 61))
	if flat.Verdict != VerdictMet || math.Abs(flat.LastHalfGrowth) > 1e-9 || flat.MaxMB != 130 {
		t.Errorf("flat: %+v", flat)
	}
	// 1 MB/s over the last 30 s around ~150 MB: +20 %: missed.
	grow := SummarizeRSS("w2", 2, rssSeries(func(i int) float64 { return 100 + float64(i) }, 61))
	if grow.Verdict != VerdictMissed || math.Abs(grow.SlopeMBPerSec-1) > 1e-3 || grow.LastHalfGrowth < 0.15 || grow.LastHalfGrowth > 0.25 {
		t.Errorf("growing: %+v", grow)
	}
	// Shrinking is not growth.
	if s := SummarizeRSS("w3", 3, rssSeries(func(i int) float64 { return 200 - float64(i) }, 61)); s.Verdict != VerdictMet {
		t.Errorf("shrinking: %+v", s)
	}
	if s := SummarizeRSS("w4", 4, rssSeries(func(int) float64 { return 1 }, 3)); s.Verdict != VerdictUnknown {
		t.Errorf("3 samples: %+v", s)
	}
	run := RSSRun{Status: experiments.StatusOK, Rate: 1000, Workers: []WorkerRSS{flat, grow},
		LagRead: true, LagAtStart: 0, LagAtHalf: 20_000, LagAtEnd: 41_000}
	if v := run.Verdict(); v != VerdictMissed {
		t.Errorf("run with a growing worker: %s", v)
	}
	run.Workers = []WorkerRSS{flat}
	if v := run.Verdict(); v != VerdictMet {
		t.Errorf("run with a flat worker: %s", v)
	}
	// The lag did not grow in the second half: no backpressure, whatever RSS did.
	kept := run
	kept.Workers, kept.LagAtEnd = []WorkerRSS{flat, grow}, 20_500
	if grew, why := kept.LagGrowth(); grew || !strings.Contains(why, "did not grow") || kept.Verdict() != VerdictUnknown {
		t.Errorf("lag 0 → 20000 → 20500: grew %v (%q), verdict %s; want not measured", grew, why, kept.Verdict())
	}
	unread := run
	unread.LagRead = false
	if grew, why := unread.LagGrowth(); grew || !strings.Contains(why, "not read") || unread.Verdict() != VerdictUnknown {
		t.Errorf("lag not read: grew %v (%q), verdict %s; want not measured", grew, why, unread.Verdict())
	}
	run.Status = experiments.StatusFailed
	if v := run.Verdict(); v != VerdictUnknown {
		t.Errorf("failed run: %s", v)
	}
}

func TestCeilingFractions(t *testing.T) {
	ceil := []Ceiling{
		{Component: CeilKafkaProduce, EventsPerSec: 200_000},
		{Component: CeilKafkaConsume, EventsPerSec: 400_000},
		{Component: CeilCodec, EventsPerSec: 900_000},
		{Component: CeilPebble, EventsPerSec: 50_000},
		{Component: CeilExchange, Error: "not measured"},
	}
	steady := []Steady{
		{Query: "hello", Status: experiments.StatusOK, EventsPerSec: 40_000},
		{Query: "counter", Status: experiments.StatusOK, EventsPerSec: 20_000},
		{Query: "nexmark-q5", Status: experiments.StatusFailed},
		{Query: "unknown-query", Status: experiments.StatusOK, EventsPerSec: 1},
	}
	got := CeilingFractions(steady, ceil)
	if len(got) != 2 {
		t.Fatalf("got %d fractions, want 2 (hello, counter): %+v", len(got), got)
	}
	if h := got[0]; h.Query != "hello" || h.Slowest != CeilKafkaProduce || math.Abs(h.Fraction-0.2) > 1e-12 || !reflect.DeepEqual(h.Missing, []string{CeilExchange}) {
		t.Errorf("hello: %+v", h)
	}
	if c := got[1]; c.Slowest != CeilPebble || math.Abs(c.Fraction-0.4) > 1e-12 {
		t.Errorf("counter: %+v", c)
	}
	none := CeilingFractions(steady[:1], nil)
	if len(none) != 1 || none[0].Slowest != "" || none[0].Fraction != 0 || len(none[0].Missing) != 4 {
		t.Errorf("no ceilings: %+v", none)
	}
}

func TestMarkdownNewSections(t *testing.T) {
	r := BenchReport{
		Steady: []Steady{
			{Query: "nexmark-q5", Operator: "q5-window", CountedAt: "q5-window", Status: experiments.StatusOK, EventsPerSec: 3000, EventsPerCPUSec: 9000, ExactnessUnchecked: "it aggregates"},
			{Query: "counter", Operator: "counter", Status: experiments.StatusOK, EventsPerSec: 20_000, EventsPerCPUSec: 30_000, Target: TargetKeyedPerCore},
		},
		Ceilings: []Ceiling{{Component: CeilPebble, EventsPerSec: 50_000, Events: 250_000, Seconds: 5, What: "pebble"}},
		RSS: &RSSRun{Query: "counter", Rate: 80000, RuntimeSec: 60, Status: experiments.StatusOK,
			LagRead: true, LagAtStart: 1200, LagAtHalf: 1_500_000, LagAtEnd: 3_100_000,
			Workers: []WorkerRSS{{Worker: "w1", PID: 7, Samples: 60, MaxMB: 210, LastHalfGrowth: 0.02, Verdict: VerdictMet}}},
	}
	r.Fractions = CeilingFractions(r.Steady, r.Ceilings)
	md := r.Markdown()
	for _, want := range []string{
		"| nexmark-q5 | q5-window |", "| unchecked | unchecked |", "| — | not measured |", "3000 (*q5-window)", // no target, lost not an exactness check
		"## Component ceilings", "| pebble-getput | 50000 |", "| counter | 20000 | pebble-getput | 50000 | 0.40 |",
		"## RSS under backpressure", "| w1 | 7 | 60 | 210.0 MB |", "+2.0 %", "Kafka lag 1200 → 1500000 → 3100000 (start, half, end)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	var rssRow *TargetRow
	for _, tr := range r.Targets() {
		if strings.HasPrefix(tr.Target, "RSS flat") {
			rssRow = &tr
		}
	}
	if rssRow == nil || rssRow.Verdict != VerdictMet || !strings.Contains(rssRow.Measured, "w1 max 210 MB, +2.0 %; Kafka lag 1200 → 1500000 → 3100000 (start, half, end)") {
		t.Errorf("RSS target row: %+v", rssRow)
	}
	// A run whose lag stayed flat says so in the row and in its section.
	r.RSS.LagAtHalf, r.RSS.LagAtEnd = 1300, 1250
	md = r.Markdown()
	for _, tr := range r.Targets() {
		if strings.HasPrefix(tr.Target, "RSS flat") && (tr.Verdict != VerdictUnknown || !strings.Contains(tr.Measured, "not measured: Kafka lag did not grow")) {
			t.Errorf("RSS target row without lag growth: %+v", tr)
		}
	}
	if !strings.Contains(md, "**Not measured**: Kafka lag did not grow through the window (1200 → 1300 → 1250") {
		t.Errorf("RSS section does not say the run was not measured:\n%s", md[strings.Index(md, "## RSS"):])
	}
}

func TestMergeSinkLatency(t *testing.T) {
	if MergeSinkLatency(nil) != nil {
		t.Error("no tasks: not nil")
	}
	one := control.Latency{Count: 10, P50Us: 100, P99Us: 900, P999Us: 990, MaxUs: 1000}
	if got := MergeSinkLatency([]control.Latency{one}); got == nil || *got != one {
		t.Errorf("one task: %+v", got)
	}
	two := MergeSinkLatency([]control.Latency{one, {Count: 5, P50Us: 200, P99Us: 500, P999Us: 2000, MaxUs: 3000, Clamped: 1}})
	want := control.Latency{Count: 15, P50Us: 200, P99Us: 900, P999Us: 2000, MaxUs: 3000, Clamped: 1}
	if two == nil || *two != want {
		t.Errorf("two tasks: %+v, want %+v", two, want)
	}
	s := Steady{Query: "hello", Status: experiments.StatusOK, E2E: two}
	md := BenchReport{Steady: []Steady{s}}.Markdown()
	if !strings.Contains(md, "| 0.2 / 0.9 / 2.0 / 3.0 ms |") {
		t.Errorf("markdown lacks the e2e cell:\n%s", md)
	}
}
