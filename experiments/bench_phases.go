package experiments

import (
	"fmt"
	"slices"
	"strings"
)

// Phases of `koala bench`, in the order they run.
const (
	PhaseMicro      = "micro"
	PhaseSteady     = "steady"
	PhaseCeilings   = "ceilings"
	PhaseDisruption = "disruption"
	PhaseState      = "state"
	PhaseRSS        = "rss"
)

// BenchPhases are all phases, in run order.
var BenchPhases = []string{PhaseMicro, PhaseSteady, PhaseCeilings, PhaseDisruption, PhaseState, PhaseRSS}

// ParsePhases parses a comma-separated phase list ("all" selects every
// phase). Unknown or repeated names are errors naming the allowed values.
func ParsePhases(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(strings.ToLower(p))
		switch {
		case p == "":
			continue
		case p == "all":
			for _, q := range BenchPhases {
				out[q] = true
			}
		case !slices.Contains(BenchPhases, p):
			return nil, fmt.Errorf("--phases: unknown phase %q (allowed: all, %s)", p, strings.Join(BenchPhases, ", "))
		case out[p]:
			return nil, fmt.Errorf("--phases: phase %q named twice", p)
		default:
			out[p] = true
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--phases: empty (allowed: all, %s)", strings.Join(BenchPhases, ", "))
	}
	return out, nil
}

// nonOneToOneQueries emit other than one output record per input record
// (aggregations, filters, joins), so the exactness ledger of `koala run`,
// which counts source records reaching the sink, reports lost ≠ 0 for them by
// design. Until queries declare this themselves, the bench decides by name.
var nonOneToOneQueries = []string{
	"nexmark-q2", "nexmark-q3", "nexmark-q4", "nexmark-q5", "nexmark-q6", "nexmark-q7", "nexmark-q8",
	"nexmark_query2", "nexmark_query3", "nexmark_query4", "nexmark_query5", "nexmark_query6", "nexmark_query7", "nexmark_query8",
}

// OneToOne reports whether query delivers every source record to the sink,
// i.e. whether its lost/duplicated counts are an exactness check.
func OneToOne(query string) bool { return !slices.Contains(nonOneToOneQueries, query) }
