package autoscale

import (
	"fmt"
	"math"
	"slices"
)

// Estimate is DS2's answer for one operator.
type Estimate struct {
	Operator string `json:"operator"`
	Current  int    `json:"current"`
	// Target is the parallelism DS2 asks for, within the caps (0 when
	// NoData).
	Target int `json:"target"`
	// Raw is Input / (TrueRate × TargetUtilization), before rounding up
	// and capping.
	Raw float64 `json:"raw"`
	// TrueRate is the records one task processes per busy second.
	TrueRate float64 `json:"true_rate"`
	// Input is the rate the operator must absorb: for a source what
	// arrives in Kafka plus Lag / CatchUpSeconds, for the others their
	// upstreams' Input times the upstreams' selectivity.
	Input float64 `json:"input"`
	// Observed is the operator's measured input rate.
	Observed float64 `json:"observed"`
	// Arrival is the rate records arrived in Kafka (sources): the rate
	// they read plus the lag's growth.
	Arrival float64 `json:"arrival,omitempty"`
	// Lag is a source's Kafka lag at the end of the window.
	Lag float64 `json:"lag,omitempty"`
	// Utilization is the busy fraction of the operator's tasks.
	Utilization float64 `json:"utilization"`
	// Capped names the cap that lowered or raised Target, if any.
	Capped string `json:"capped,omitempty"`
	// NoData: the operator was never busy in the window, so its true rate
	// is unknown and it keeps its parallelism.
	NoData bool `json:"no_data,omitempty"`
}

// Targets runs DS2 over the job in one pass from the sources downstream
// and returns one estimate per operator, in job order.
//
// A source must absorb its arrival rate (records read per second plus the
// growth of its lag) plus LagEnd / CatchUpSeconds; an operator must absorb
// the sum, over its inputs, of the input's rate times the input's
// selectivity. Its target is ceil(rate / (true rate per task ×
// TargetUtilization)), within 1..MaxParallelism (JobState.MaxParallelism).
// An operator that reported no input and has none to absorb needs one
// task. One that did not report, or processed records without busy time,
// keeps its parallelism (NoData); the rate it passes on is then its
// measured output.
func Targets(p Policy, job JobState, obs Observation) []Estimate {
	out := make([]Estimate, 0, len(job.Operators))
	output := map[string]float64{} // operator → rate it passes on (looked up, never iterated)
	done := map[string]bool{}
	secs := obs.Seconds()
	// Operators whose inputs are all done, in job order, until none is
	// left (a job lists its operators upstream first; the loop also
	// copes with any other order and stops on a cycle).
	for len(done) < len(job.Operators) {
		progress := false
		for _, op := range job.Operators {
			ready := true
			for _, in := range op.Inputs {
				if !done[in] {
					ready = false
				}
			}
			if done[op.Name] || !ready {
				continue
			}
			load, _ := obs.Operator(op.Name)
			e := Estimate{Operator: op.Name, Current: op.Parallelism, TrueRate: load.TrueRate(), Observed: load.RecordsIn, Utilization: load.Utilization()}
			if op.Source || len(op.Inputs) == 0 {
				e.Lag = load.LagEnd
				e.Arrival = load.RecordsIn
				if secs > 0 {
					e.Arrival = max(0, load.RecordsIn+(load.LagEnd-load.LagStart)/secs)
				}
				e.Input = e.Arrival + load.LagEnd/p.CatchUpSeconds
			} else {
				for _, in := range op.Inputs {
					e.Input += output[in]
				}
			}
			switch {
			case e.TrueRate > 0:
				e.Raw = e.Input / (e.TrueRate * p.TargetUtilization)
				e.Target, e.Capped = capTarget(p, job, op, e.Raw)
				output[op.Name] = e.Input * load.Selectivity()
			case load.Tasks > 0 && e.Input == 0 && load.RecordsIn == 0:
				// Reported, and nothing to do: one task is enough.
				e.Target, e.Capped = capTarget(p, job, op, 0)
			default:
				e.NoData = true
				output[op.Name] = load.RecordsOut
			}
			out = append(out, e)
			done[op.Name] = true
			progress = true
		}
		if !progress {
			break // a cycle: the rest has no estimate
		}
	}
	// Job order.
	slices.SortStableFunc(out, func(a, b Estimate) int { return index(job, a.Operator) - index(job, b.Operator) })
	return out
}

// capTarget rounds raw up and keeps it within 1..JobState.MaxParallelism.
func capTarget(p Policy, job JobState, op Operator, raw float64) (int, string) {
	t := int(math.Ceil(raw - 1e-9)) // 2.0000000001 of float noise is 2
	if raw > float64(math.MaxInt32) {
		t = math.MaxInt32
	}
	limit, by := job.MaxParallelism(p, op)
	switch {
	case t > limit:
		return limit, fmt.Sprintf("%s %d", by, limit)
	case t < 1:
		return 1, ""
	}
	return t, ""
}

func index(job JobState, name string) int {
	return slices.IndexFunc(job.Operators, func(op Operator) bool { return op.Name == name })
}
