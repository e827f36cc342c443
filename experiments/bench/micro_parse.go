package bench

import (
	"bufio"
	"slices"
	"strconv"
	"strings"
)

// MicroResult is one line of `go test -bench` output.
type MicroResult struct {
	Package string             `json:"package"`
	Name    string             `json:"name"` // without the "Benchmark" prefix and the -GOMAXPROCS suffix
	N       int64              `json:"n"`
	Metrics map[string]float64 `json:"metrics"` // unit → value: ns/op, B/op, allocs/op, MB/s, custom units
}

// ParseGoBench parses the text output of `go test -bench` (one or more
// packages). Lines that are not benchmark results are skipped.
func ParseGoBench(out string) []MicroResult {
	var res []MicroResult
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r := MicroResult{Package: pkg, Name: name, N: n, Metrics: map[string]float64{}}
		ok := true
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				ok = false
				break
			}
			r.Metrics[f[i+1]] = v
		}
		if ok {
			res = append(res, r)
		}
	}
	return res
}

// FindMicro returns the result named name (e.g. "KLTLookup/hit/batch").
func FindMicro(rs []MicroResult, name string) (MicroResult, bool) {
	for _, r := range rs {
		if r.Name == name {
			return r, true
		}
	}
	return MicroResult{}, false
}

// CollapseMicro merges the results a benchmark has from several runs (go
// test -count, or a repeat run) into one per package and name, in order of
// first appearance: each metric is the median of the runs that report it,
// N their total iterations, and the merged result gains "runs",
// "ns/op-min" and "ns/op-max". A single run is passed through unchanged.
// On a shared machine one run can land in a burst of another tenant's
// memory traffic; the median of several is the benchmark's usual cost.
func CollapseMicro(rs []MicroResult) []MicroResult {
	type key struct{ pkg, name string }
	groups := map[key][]MicroResult{}
	var order []key
	for _, r := range rs {
		k := key{r.Package, r.Name}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]MicroResult, 0, len(order))
	for _, k := range order {
		g := groups[k]
		if len(g) == 1 {
			out = append(out, g[0])
			continue
		}
		m := MicroResult{Package: k.pkg, Name: k.name, Metrics: map[string]float64{}}
		vals := map[string][]float64{}
		for _, r := range g {
			m.N += r.N
			for unit, v := range r.Metrics {
				vals[unit] = append(vals[unit], v)
			}
		}
		for unit, vs := range vals {
			m.Metrics[unit] = median(vs)
		}
		if ns := vals["ns/op"]; len(ns) > 0 {
			m.Metrics["ns/op-min"], m.Metrics["ns/op-max"] = slices.Min(ns), slices.Max(ns)
		}
		m.Metrics["runs"] = float64(len(g))
		out = append(out, m)
	}
	return out
}

// median of vs (not empty); the mean of the middle two for an even count.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
