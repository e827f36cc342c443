package experiments

import (
	"bufio"
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
