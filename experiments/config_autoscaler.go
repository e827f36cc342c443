package experiments

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"koala/workflows"
	"koala/workflows/autoscale"
)

// "Autoscaler": {...} runs the Autoscale workflow beside the experiment
// (RunExperiment starts it as a child when the job's tasks run). Its
// fields are autoscale.Policy's, by their names; every one is optional:
//
//	"Autoscaler": {"TargetUtilization": 0.7, "IntervalSeconds": 10, "ScaleDownDelaySeconds": 60,
//	               "MaxParallelism": 8, "Operators": ["counter"]}
//
// An experiment with an Autoscaler block and no "ReconfigProtocol"
// reconfigures with the lazy protocol.

// autoscalerFields are the names inside "Autoscaler".
var autoscalerFields = []string{
	autoscale.FieldInterval.Name, autoscale.FieldWindow.Name, autoscale.FieldUtilization.Name, autoscale.FieldCatchUp.Name,
	autoscale.FieldStabilization.Name, autoscale.FieldScaleDownDelay.Name, autoscale.FieldMinChange.Name,
	autoscale.FieldMaxParallelism.Name, autoscale.FieldReversalDrop.Name, autoscale.FieldOperators.Name, autoscale.FieldProtocol.Name,
}

// autoscaler parses the "Autoscaler" block into a policy with its
// defaults filled; range problems are reported by field.
func (p *parser) autoscaler(raw json.RawMessage) *autoscale.Policy {
	at := where("Autoscaler", "")
	if k := kindOf(raw); k != "object" {
		p.errorf("%s: expected an object of autoscaler settings (%s), got %s", at, strings.Join(autoscalerFields, ", "), k)
		return nil
	}
	members, err := objectMembers(raw)
	if err != nil {
		p.errorf("%s: %v", at, err)
		return nil
	}
	slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
	pol := autoscale.DefaultPolicy()
	seen := map[string]bool{}
	ok := true
	for _, m := range members {
		at := where(m.name, "Autoscaler")
		if seen[m.name] {
			p.errorf("%s appears more than once", at)
			ok = false
			continue
		}
		seen[m.name] = true
		good := true
		switch m.name {
		case autoscale.FieldInterval.Name:
			good = p.floatTo(&pol.IntervalSeconds, m.raw, at)
		case autoscale.FieldWindow.Name:
			good = p.floatTo(&pol.WindowSeconds, m.raw, at)
		case autoscale.FieldUtilization.Name:
			good = p.floatTo(&pol.TargetUtilization, m.raw, at)
		case autoscale.FieldCatchUp.Name:
			good = p.floatTo(&pol.CatchUpSeconds, m.raw, at)
		case autoscale.FieldStabilization.Name:
			good = p.floatTo(&pol.StabilizationSeconds, m.raw, at)
		case autoscale.FieldScaleDownDelay.Name:
			good = p.floatTo(&pol.ScaleDownDelaySeconds, m.raw, at)
		case autoscale.FieldReversalDrop.Name:
			good = p.floatTo(&pol.ReversalDrop, m.raw, at)
		case autoscale.FieldMinChange.Name:
			good = p.intTo(&pol.MinChange, m.raw, at, math.MinInt32, math.MaxInt32)
		case autoscale.FieldMaxParallelism.Name:
			good = p.intTo(&pol.MaxParallelism, m.raw, at, math.MinInt32, math.MaxInt32)
		case autoscale.FieldOperators.Name:
			pol.Operators, good = p.strs(m.raw, at, true)
		case autoscale.FieldProtocol.Name:
			good = p.enumTo(&pol.Protocol, m.raw, at, protocols)
		default:
			p.errorf("unknown field %q in Autoscaler%s", m.name, suggest(m.name, autoscalerFields))
			good = false
		}
		ok = ok && good
	}
	if !ok {
		return nil
	}
	if err := pol.Validate(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			p.errorf("Autoscaler.%s", line)
		}
		return nil
	}
	return &pol
}

// floatTo parses a JSON number.
func (p *parser) floatTo(dst *float64, raw json.RawMessage, at string) bool {
	if k := kindOf(raw); k != "number" {
		p.errorf("%s: expected a number, got %s", at, k)
		return false
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
	if err != nil || math.IsInf(v, 0) {
		p.errorf("%s: %s is not a finite number", at, compact(raw))
		return false
	}
	*dst = v
	return true
}

// resolveAutoscaler checks the parsed block against the rest of the
// config: MaxParallelism within NumBuckets, operators of the query (when
// the query is known here), the protocol; and defaults the protocol to
// lazy.
func (p *parser) resolveAutoscaler(in *workflows.ExperimentInput, seen map[string]bool) {
	pol := in.Autoscaler
	if pol == nil {
		return
	}
	if !seen["ReconfigProtocol"] {
		in.ReconfigProtocol = workflows.ProtocolLazy
	}
	if pol.MaxParallelism > in.NumBuckets {
		p.errorf("Autoscaler.%s: %d is above NumBuckets (%d): an operator cannot have more tasks than buckets",
			autoscale.FieldMaxParallelism, pol.MaxParallelism, in.NumBuckets)
	}
	if pol.Protocol != "" && pol.Protocol != in.ReconfigProtocol {
		p.errorf("Autoscaler.%s: %q, but ReconfigProtocol is %q: a reconfigure update runs the experiment's protocol", autoscale.FieldProtocol, pol.Protocol, in.ReconfigProtocol)
	}
	if ops := operatorNames(in.QueryName); ops != nil { // unknown queries are CheckQuery's to report
		for _, name := range pol.Operators {
			if !slices.Contains(ops, name) {
				p.errorf("Autoscaler.%s: operator %q is not in query %s (operators: %s)", autoscale.FieldOperators, name, in.QueryName, strings.Join(ops, ", "))
			}
		}
	}
}
