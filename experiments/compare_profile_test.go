package experiments

import (
	"strings"
	"testing"

	"koala/experiments/cpuprof"
)

func TestComparisonProfileMarkdown(t *testing.T) {
	if md := (Comparison{Rows: []CompareRow{{Protocol: "lazy"}}}).profileMarkdown(); md != "" {
		t.Fatalf("no profiles: %q, want no section", md)
	}
	names := []string{"serving fetches", "operator", "tiny", cpuprof.Other}
	c := Comparison{ProfileCategories: names, Rows: []CompareRow{
		{Protocol: "lazy", Profiles: []WorkerProfile{
			{Window: WindowBefore, FromSec: -11, Seconds: 10, Worker: "w2", Tasks: []string{"op-0"}, File: "/r/profiles/lazy-before-w2.pprof",
				Split: &cpuprof.Split{CPUSec: 9, Shares: []float64{0, 90, 1, 9}, Across: 30}},
			{Window: WindowAfter, FromSec: 15, Seconds: 10, Worker: "w2", Tasks: []string{"op-0"},
				Split: &cpuprof.Split{CPUSec: 19.5, Shares: []float64{25, 60, 1.5, 13.5}, Across: 45}},
			{Window: WindowAfter, FromSec: 15, Seconds: 10, Worker: "w3", Error: "GET http://127.0.0.1:1/debug/pprof/profile: refused"},
		}},
	}}
	md := c.Markdown()
	for _, want := range []string{
		"## Where the workers' CPU went (`--profile`)",
		"| protocol | window | worker (tasks at the end) | cores | serving fetches | operator | other | Pebble reads (any caller) |",
		// tiny (never ≥ 2 %) is folded into other.
		"| lazy | before (-11 s, 10 s) | w2 (op-0) `lazy-before-w2.pprof` | 0.90 | 0.0 | 90.0 | 10.0 | 30.0 |",
		"| lazy | after (+15 s, 10 s) | w2 (op-0) | 1.95 | 25.0 | 60.0 | 15.0 | 45.0 |",
		"| lazy | after (+15 s, 10 s) | w3 | not measured: GET http://127.0.0.1:1/debug/pprof/profile: refused |  |  |  |  |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("compare.md lacks %q\n%s", want, md)
		}
	}
}
