package control

import (
	"fmt"
	"strings"
	"time"
)

// ParamSyntheticCost gives operators a fixed cost per record, spent
// waiting (not computing) before each batch is processed:
// "counter=250us" or "counter=250us,mapper=1ms". It stands in for an
// operator bound by something other than this host's CPU (a remote
// lookup, a slow device), whose capacity grows with its parallelism even
// on a machine with few cores: the autoscaling benchmark needs such an
// operator, with a known true rate (1 / cost per task), to show a scale-out
// paying off on a 2-core host. Unset: no cost.
const ParamSyntheticCost = "SyntheticCostPerRecord"

// MaxSyntheticCost bounds one record's cost: beyond it a batch of the
// usual size would stall its task for minutes.
const MaxSyntheticCost = 100 * time.Millisecond

// SyntheticCost reads ParamSyntheticCost of job: operator's cost per
// record (0 when the parameter or the operator is not in it). Any bad
// entry is an error naming the parameter, whichever operator asks.
func SyntheticCost(job JobSpec, operator string) (time.Duration, error) {
	costs, err := SyntheticCosts(job.Params[ParamSyntheticCost])
	if err != nil {
		return 0, err
	}
	return costs[operator], nil
}

// SyntheticCosts parses a ParamSyntheticCost value into operator → cost.
func SyntheticCosts(s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, entry := range strings.Split(s, ",") {
		op, d, ok := strings.Cut(strings.TrimSpace(entry), "=")
		op = strings.TrimSpace(op)
		if !ok || op == "" {
			return nil, fmt.Errorf("job param %s %q: entry %q is not operator=duration (e.g. counter=250us)", ParamSyntheticCost, s, entry)
		}
		cost, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || cost < 0 || cost > MaxSyntheticCost {
			return nil, fmt.Errorf("job param %s %q: %s's cost %q: want a duration from 0 to %s per record", ParamSyntheticCost, s, op, d, MaxSyntheticCost)
		}
		if _, dup := out[op]; dup {
			return nil, fmt.Errorf("job param %s %q: operator %s named twice", ParamSyntheticCost, s, op)
		}
		out[op] = cost
	}
	return out, nil
}
