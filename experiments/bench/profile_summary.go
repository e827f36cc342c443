package bench

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/pprof/profile"

	"koala/experiments/cpuprof"
)

// CPU profiles of `koala bench --profile`: the workers' profiles taken over
// each steady-state run's measurement window, and the micro-benchmarks'
// -cpuprofile per package, summarised as the functions with the most flat
// CPU time.

// TopHot is how many functions a profile summary lists.
const TopHot = 10

// HotFunction is one function of a CPU profile summary. Flat is CPU time
// sampled in the function itself, cum in it or anything it called; both as
// a share of all CPU time sampled in the summarised profiles.
type HotFunction struct {
	Function string  `json:"function"`
	FlatSec  float64 `json:"flat_cpu_sec"`
	FlatPct  float64 `json:"flat_pct"`
	CumPct   float64 `json:"cum_pct"`
}

// ProfileSummary summarises the CPU profiles of one steady-state run (one
// file per worker, added up) or of one micro-benchmark package.
type ProfileSummary struct {
	Name    string        `json:"name"`              // query, or the micro package
	Files   []string      `json:"files"`             // profiles that were read
	Seconds float64       `json:"seconds,omitempty"` // requested profiling duration (steady)
	CPUSec  float64       `json:"cpu_sec"`           // CPU time sampled over all files
	Top     []HotFunction `json:"top"`
	Errors  []string      `json:"errors,omitempty"` // workers or files without a profile, and why
}

// BenchProfiles is the profiles part of a bench report.
type BenchProfiles struct {
	Dir    string           `json:"dir"` // where the .pprof files are
	Steady []ProfileSummary `json:"steady,omitempty"`
	Micro  []ProfileSummary `json:"micro,omitempty"`
	Notes  []string         `json:"notes,omitempty"`
}

// SummariseCPU adds up the CPU profiles ps by function and returns the n
// functions with the most flat CPU time (ties by name) and the total CPU
// seconds sampled. Flat time goes to the innermost frame of a sample's leaf
// location (inlined calls count as their own functions, as in pprof);
// cumulative time counts each function once per sample.
func SummariseCPU(ps []*profile.Profile, n int) ([]HotFunction, float64, error) {
	flat := map[string]float64{}
	cum := map[string]float64{}
	var total float64
	for _, p := range ps {
		idx, err := cpuprof.CPUIndex(p)
		if err != nil {
			return nil, 0, err
		}
		unit := p.SampleType[idx].Unit
		for _, s := range p.Sample {
			if idx >= len(s.Value) {
				return nil, 0, fmt.Errorf("sample with %d values, want at least %d", len(s.Value), idx+1)
			}
			v := cpuprof.Nanos(s.Value[idx], unit)
			if v == 0 {
				continue
			}
			total += v
			seen := map[string]bool{}
			for li, loc := range s.Location {
				for k, line := range loc.Line {
					name := functionName(line.Function, loc)
					if li == 0 && k == 0 {
						flat[name] += v
					}
					if !seen[name] {
						seen[name] = true
						cum[name] += v
					}
				}
				if len(loc.Line) == 0 {
					name := functionName(nil, loc)
					if li == 0 {
						flat[name] += v
					}
					if !seen[name] {
						seen[name] = true
						cum[name] += v
					}
				}
			}
		}
	}
	names := make([]string, 0, len(flat))
	for name := range flat {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if flat[names[i]] != flat[names[j]] {
			return flat[names[i]] > flat[names[j]]
		}
		return names[i] < names[j]
	})
	if len(names) > n {
		names = names[:n]
	}
	out := make([]HotFunction, 0, len(names))
	for _, name := range names {
		h := HotFunction{Function: name, FlatSec: flat[name] / 1e9}
		if total > 0 {
			h.FlatPct, h.CumPct = 100*flat[name]/total, 100*cum[name]/total
		}
		out = append(out, h)
	}
	return out, total / 1e9, nil
}

// functionName names a frame; an unsymbolised one by its address.
func functionName(f *profile.Function, loc *profile.Location) string {
	if f != nil && f.Name != "" {
		return f.Name
	}
	return fmt.Sprintf("0x%x", loc.Address)
}

// SummariseFiles reads the profiles at paths and summarises them into s
// (Files, CPUSec, Top). A file that cannot be read or parsed is named in
// s.Errors and left out; the others are still summarised.
func SummariseFiles(s ProfileSummary, paths []string, n int) ProfileSummary {
	var ps []*profile.Profile
	for _, path := range paths {
		p, err := cpuprof.Read(path)
		if err != nil {
			s.Errors = append(s.Errors, err.Error())
			continue
		}
		ps = append(ps, p)
		s.Files = append(s.Files, path)
	}
	if len(ps) == 0 {
		return s
	}
	top, cpu, err := SummariseCPU(ps, n)
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
		return s
	}
	s.Top, s.CPUSec = top, cpu
	return s
}

// profilesMarkdown is the Profiles section of BENCHMARKS.md; empty when the
// run took no profiles.
func (r BenchReport) profilesMarkdown() string {
	p := r.Profiles
	if p == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n## Profiles\n\n")
	fmt.Fprintf(&b, "`koala bench --profile`: CPU profiles in `%s` (open one with `go tool pprof -top <file>`). "+
		"Steady state: `/debug/pprof/profile` of every worker over the run's measurement window, one file per worker (`<query>-<worker>.pprof`), added up below; "+
		"micro-benchmarks: `go test -cpuprofile`, one file per package (`micro-<package>.pprof`). "+
		"*flat* is CPU time in the function itself, *cum* in it and its callees, both as a share of all CPU time sampled in that row's files; top %d by flat.\n", p.Dir, TopHot)
	for _, n := range p.Notes {
		b.WriteString("\n- " + esc(n))
	}
	if len(p.Notes) > 0 {
		b.WriteString("\n")
	}
	section := func(title string, ss []ProfileSummary) {
		for _, s := range ss {
			fmt.Fprintf(&b, "\n### %s %s\n\n", title, s.Name)
			var files []string
			for _, f := range s.Files {
				files = append(files, "`"+f+"`")
			}
			if s.Seconds > 0 {
				fmt.Fprintf(&b, "%.0f s requested per worker; ", s.Seconds)
			}
			fmt.Fprintf(&b, "%.1f CPU-s sampled in %s.\n", s.CPUSec, strings.Join(files, ", "))
			for _, e := range s.Errors {
				fmt.Fprintf(&b, "\n- missing: %s", esc(e))
			}
			if len(s.Errors) > 0 {
				b.WriteString("\n")
			}
			if len(s.Top) == 0 {
				b.WriteString("\nNo samples.\n")
				continue
			}
			b.WriteString("\n| function | flat CPU-s | flat % | cum % |\n|---|---|---|---|\n")
			for _, h := range s.Top {
				fmt.Fprintf(&b, "| `%s` | %.2f | %.1f | %.1f |\n", esc(h.Function), h.FlatSec, h.FlatPct, h.CumPct)
			}
		}
	}
	section("steady", p.Steady)
	section("micro", p.Micro)
	return b.String()
}
