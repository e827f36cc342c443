package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"koala/experiments/internal/fixture"

	"github.com/google/pprof/profile"
)

// testCPUProfile is a small CPU Profile: main calls a (30 ms in a), a calls
// b (50 ms in b), and b's inlined call of c (20 ms in c) from main. The
// first sample value is a count, the second CPU time, as in Go's profiles.
func testCPUProfile() *profile.Profile {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	fMain, fA, fB, fC := fn(1, "main.main"), fn(2, "main.a"), fn(3, "main.b"), fn(4, "main.c")
	loc := func(id uint64, fs ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id, Address: 0x1000 * id}
		for _, f := range fs {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lMain, lA, lB, lCinB := loc(1, fMain), loc(2, fA), loc(3, fB), loc(4, fC, fB)
	ms := int64(1e6)
	return &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10 * ms,
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lA, lMain}, Value: []int64{3, 30 * ms}},
			{Location: []*profile.Location{lB, lA, lMain}, Value: []int64{5, 50 * ms}},
			{Location: []*profile.Location{lCinB, lMain}, Value: []int64{2, 20 * ms}},
		},
		Location: []*profile.Location{lMain, lA, lB, lCinB},
		Function: []*profile.Function{fMain, fA, fB, fC},
	}
}

func TestBenchProfileSummariseCPU(t *testing.T) {
	p := testCPUProfile()
	for _, tc := range []struct {
		name   string
		ps     []*profile.Profile
		n      int
		want   []HotFunction
		cpuSec float64
	}{
		{"one profile", []*profile.Profile{p}, TopHot, []HotFunction{
			{"main.b", 0.05, 50, 70}, // flat 50 ms; cum with its inlined c
			{"main.a", 0.03, 30, 80},
			{"main.c", 0.02, 20, 20},
		}, 0.1},
		{"two workers add up", []*profile.Profile{p, p}, 2, []HotFunction{
			{"main.b", 0.1, 50, 70},
			{"main.a", 0.06, 30, 80},
		}, 0.2},
		{"no samples", []*profile.Profile{{SampleType: p.SampleType}}, TopHot, []HotFunction{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, cpu, err := SummariseCPU(tc.ps, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if !fixture.Approx(cpu, tc.cpuSec) || len(got) != len(tc.want) {
				t.Fatalf("got %+v, %.3f CPU-s; want %+v, %.3f", got, cpu, tc.want, tc.cpuSec)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Function != w.Function || !fixture.Approx(g.FlatSec, w.FlatSec) || !fixture.Approx(g.FlatPct, w.FlatPct) || !fixture.Approx(g.CumPct, w.CumPct) {
					t.Errorf("row %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
	if _, _, err := SummariseCPU([]*profile.Profile{{}}, TopHot); err == nil {
		t.Error("a profile without sample types: no error")
	}
}

// Files are read and summarised; an unreadable one is named and the rest
// still counted.
func TestBenchProfileSummariseFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "counter-w1.pprof")
	f, err := os.Create(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := testCPUProfile().Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	bad := filepath.Join(dir, "counter-w2.pprof")
	if err := os.WriteFile(bad, []byte("not a profile"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "counter-w3.pprof")
	s := SummariseFiles(ProfileSummary{Name: "counter", Seconds: 30}, []string{good, bad, missing}, 2)
	if len(s.Files) != 1 || s.Files[0] != good || !fixture.Approx(s.CPUSec, 0.1) || len(s.Top) != 2 || s.Top[0].Function != "main.b" {
		t.Fatalf("summary %+v", s)
	}
	if len(s.Errors) != 2 || !strings.Contains(s.Errors[0], bad) || !strings.Contains(s.Errors[1], missing) {
		t.Fatalf("errors %q, want %s and %s named", s.Errors, bad, missing)
	}
}

func TestBenchProfileMarkdown(t *testing.T) {
	if md := (BenchReport{}).profilesMarkdown(); md != "" {
		t.Fatalf("no --profile: %q, want no section", md)
	}
	top, cpu, err := SummariseCPU([]*profile.Profile{testCPUProfile()}, TopHot)
	if err != nil {
		t.Fatal(err)
	}
	r := BenchReport{Profiles: &BenchProfiles{
		Dir:    "results/bench/run-x/profiles",
		Steady: []ProfileSummary{{Name: "counter", Files: []string{"p/counter-w1.pprof"}, Seconds: 34, CPUSec: cpu, Top: top, Errors: []string{"worker w2: refused"}}},
		Micro:  []ProfileSummary{{Name: "./dataplane", Errors: []string{"profile p/micro-dataplane.pprof: no such file"}}},
		Notes:  []string{"worker w3 (pid 7) not profiled"},
	}}
	md := r.Markdown()
	for _, want := range []string{
		"## Profiles",
		"`results/bench/run-x/profiles`",
		"- worker w3 (pid 7) not profiled",
		"### steady counter",
		"34 s requested per worker; 0.1 CPU-s sampled in `p/counter-w1.pprof`.",
		"- missing: worker w2: refused",
		"| `main.b` | 0.05 | 50.0 | 70.0 |\n| `main.a` | 0.03 | 30.0 | 80.0 |\n| `main.c` | 0.02 | 20.0 | 20.0 |",
		"### micro ./dataplane",
		"No samples.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}
