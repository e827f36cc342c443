package bench

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
	// PhaseLargeState runs the rows that first build gigabytes of state
	// (a warm-up run per row), apart from steady so they can be run or
	// left out on their own.
	PhaseLargeState = "large-state"
	// PhaseAutoscale runs the autoscaler through a 2× input step, once
	// per protocol (autoscale.go).
	PhaseAutoscale = "autoscale"
)

// BenchPhases are all phases, in run order.
var BenchPhases = []string{PhaseMicro, PhaseSteady, PhaseCeilings, PhaseDisruption, PhaseAutoscale, PhaseState, PhaseRSS, PhaseLargeState}

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
