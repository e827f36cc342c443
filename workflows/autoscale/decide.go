package autoscale

import (
	"fmt"
	"strings"
	"time"
)

// Decision is the outcome of one tick: DS2's estimates and what came of
// them. A tick that was skipped (Skip) computed nothing.
type Decision struct {
	// Seq numbers the autoscaler's ticks from 1.
	Seq int `json:"seq"`
	// From and At bound the metrics window it was made from.
	From time.Time `json:"from"`
	At   time.Time `json:"at"`
	// Skip says why no estimate was made (a reconfiguration runs, the
	// job stabilizes, ...).
	Skip      string     `json:"skip,omitempty"`
	Estimates []Estimate `json:"estimates,omitempty"`
	// Changes are the reconfigurations decided; Holds the changes DS2
	// asked for that a guard held back.
	Changes []Change `json:"changes,omitempty"`
	Holds   []Hold   `json:"holds,omitempty"`
}

// Change is one reconfiguration decided.
type Change struct {
	Operator string `json:"operator"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	// Summary is its line in the Temporal UI and the decision log:
	// "counter 2→4: true rate 9.1 K/s/task, input 30 K/s".
	Summary string `json:"summary"`
	// Set once it ran (Applied): its outcome (OutcomeDone, OutcomeRejected
	// or OutcomeFailed) with a detail (how long it took, the reason), the
	// reconfiguration's workflow id and when it ended.
	Outcome       string    `json:"outcome,omitempty"`
	OutcomeDetail string    `json:"outcome_detail,omitempty"`
	WorkflowID    string    `json:"workflow_id,omitempty"`
	Ended         time.Time `json:"ended,omitempty"`
}

// Result renders the outcome: "done in 3.2s", "rejected: …".
func (c Change) Result() string {
	switch {
	case c.Outcome == "":
		return ""
	case c.OutcomeDetail == "":
		return c.Outcome
	case c.Outcome == OutcomeDone:
		return c.Outcome + " " + c.OutcomeDetail
	}
	return c.Outcome + ": " + c.OutcomeDetail
}

// Outcomes of a Change.
const (
	OutcomeDone     = "done"
	OutcomeRejected = "rejected"
	OutcomeFailed   = "failed"
)

// Hold is a change DS2 asked for that a guard held back.
type Hold struct {
	Operator string `json:"operator"`
	From     int    `json:"from"`
	To       int    `json:"to"`
	Reason   string `json:"reason"`
}

// Acted tells whether the tick decided a reconfiguration.
func (d Decision) Acted() bool { return len(d.Changes) > 0 }

// Recorded tells whether the tick is a decision worth recording: it
// changed something or held a change back.
func (d Decision) Recorded() bool { return len(d.Changes) > 0 || len(d.Holds) > 0 }

// Estimate returns the estimate of op.
func (d Decision) Estimate(op string) (Estimate, bool) {
	for _, e := range d.Estimates {
		if e.Operator == op {
			return e, true
		}
	}
	return Estimate{}, false
}

// Guards is what the guards remember between ticks.
type Guards struct {
	// LastChange is when the latest reconfiguration of the job ended.
	LastChange time.Time `json:"last_change,omitempty"`
	Ops        []OpGuard `json:"ops,omitempty"`
}

// OpGuard is one operator's guard memory.
type OpGuard struct {
	Operator string `json:"operator"`
	// BelowSince is the first window end from which on DS2 asked for
	// fewer tasks than the operator has (zero: it does not), BelowMax the
	// most it asked for since.
	BelowSince time.Time `json:"below_since,omitempty"`
	BelowMax   int       `json:"below_max,omitempty"`
	// ScaledOutInput is the input rate at which the autoscaler last
	// scaled the operator out (0: its last change was not a scale-out).
	ScaledOutInput float64 `json:"scaled_out_input,omitempty"`
}

// op returns the guard memory of name, adding it if missing.
func (g *Guards) op(name string) *OpGuard {
	for i := range g.Ops {
		if g.Ops[i].Operator == name {
			return &g.Ops[i]
		}
	}
	g.Ops = append(g.Ops, OpGuard{Operator: name})
	return &g.Ops[len(g.Ops)-1]
}

// clone copies g so that Decide never changes its caller's memory.
func (g Guards) clone() Guards {
	g.Ops = append([]OpGuard(nil), g.Ops...)
	return g
}

// Decide runs DS2 on obs and passes its targets through the guards. It
// returns the decision and the guards' memory for the next tick; a
// decision's changes are not in that memory until Applied.
func Decide(p Policy, job JobState, obs Observation, g Guards) (Decision, Guards) {
	g = g.clone()
	d := Decision{From: obs.From, At: obs.To}
	if job.LastReconfigEnd.After(g.LastChange) {
		g.LastChange = job.LastReconfigEnd
	}
	switch {
	case job.Status != StatusRunning:
		d.Skip = "job " + job.Status
		if job.Detail != "" {
			d.Skip += ": " + job.Detail
		}
		return d, g
	case len(job.Reconfiguring) > 0:
		r := job.Reconfiguring[0]
		d.Skip = fmt.Sprintf("reconfiguration %s of %s is running", r.WorkflowID, r.Operator)
		return d, g
	case obs.From.Before(p.WindowStart(obs.To, g.LastChange)):
		d.Skip = fmt.Sprintf("stabilizing: the window from %s reaches into the %gs after the reconfiguration that ended at %s",
			clock(obs.From), p.StabilizationSeconds, clock(g.LastChange))
		return d, g
	case obs.Seconds() < p.MinWindowSeconds():
		d.Skip = fmt.Sprintf("window of %gs is shorter than %gs", obs.Seconds(), p.MinWindowSeconds())
		return d, g
	case len(obs.Operators) == 0:
		d.Skip = "no metric rows in the window (are the workers writing metrics?)"
		return d, g
	}
	d.Estimates = Targets(p, job, obs)
	for _, e := range d.Estimates {
		op, _ := job.Operator(e.Operator)
		if !p.Scaled(op) || e.NoData {
			continue
		}
		og := g.op(e.Operator)
		switch {
		case e.Target > e.Current:
			og.BelowSince, og.BelowMax = time.Time{}, 0
			if e.Target-e.Current < p.MinChange {
				d.Holds = append(d.Holds, Hold{e.Operator, e.Current, e.Target, fmt.Sprintf("a change of %d is below MinChange %d", e.Target-e.Current, p.MinChange)})
				continue
			}
			d.Changes = append(d.Changes, Change{Operator: e.Operator, From: e.Current, To: e.Target, Summary: Summary(e.Operator, e.Current, e.Target, e)})
		case e.Target < e.Current:
			if og.BelowSince.IsZero() || og.BelowMax >= e.Current { // (the latter: rescaled by someone else)
				og.BelowSince, og.BelowMax = obs.To, e.Target
			}
			og.BelowMax = max(og.BelowMax, e.Target)
			to := og.BelowMax
			waited := obs.To.Sub(og.BelowSince).Seconds()
			switch {
			case waited < p.ScaleDownDelaySeconds:
				d.Holds = append(d.Holds, Hold{e.Operator, e.Current, to, fmt.Sprintf("scale-down delay: DS2 has asked for %d or fewer for %gs of %gs", to, waited, p.ScaleDownDelaySeconds)})
			case og.ScaledOutInput > 0 && e.Input > og.ScaledOutInput*(1-p.ReversalDrop):
				d.Holds = append(d.Holds, Hold{e.Operator, e.Current, to, fmt.Sprintf("no oscillation: input %s/s is not %g%% below the %s/s it was scaled out at",
					Rate(e.Input), p.ReversalDrop*100, Rate(og.ScaledOutInput))})
			case e.Current-to < p.MinChange:
				d.Holds = append(d.Holds, Hold{e.Operator, e.Current, to, fmt.Sprintf("a change of %d is below MinChange %d", e.Current-to, p.MinChange)})
			default:
				d.Changes = append(d.Changes, Change{Operator: e.Operator, From: e.Current, To: to, Summary: Summary(e.Operator, e.Current, to, e)})
			}
		default:
			og.BelowSince, og.BelowMax = time.Time{}, 0
		}
	}
	return d, g
}

// Applied returns the guards' memory after change c of decision d ran
// with outcome c.Outcome, ending at c.Ended. Only a change that was done
// moves LastChange and the operator's memory.
func (g Guards) Applied(d Decision, c Change) Guards {
	g = g.clone()
	if c.Outcome != OutcomeDone {
		return g
	}
	if c.Ended.After(g.LastChange) {
		g.LastChange = c.Ended
	}
	og := g.op(c.Operator)
	og.BelowSince, og.BelowMax = time.Time{}, 0
	og.ScaledOutInput = 0
	if c.To > c.From {
		if e, ok := d.Estimate(c.Operator); ok {
			og.ScaledOutInput = e.Input
		}
	}
	return g
}

// Summary is a change's line: "counter 2→4: true rate 9.1 K/s/task, input 30 K/s".
func Summary(op string, from, to int, e Estimate) string {
	s := fmt.Sprintf("%s %d→%d: true rate %s/s/task, input %s/s", op, from, to, Rate(e.TrueRate), Rate(e.Input))
	if e.Capped != "" {
		s += " (capped by " + e.Capped + ")"
	}
	return s
}

// Line renders the decision as one log line (with its changes' outcomes).
func (d Decision) Line() string {
	var parts []string
	for _, c := range d.Changes {
		s := c.Summary
		if r := c.Result(); r != "" {
			s += " [" + r + "]"
		}
		parts = append(parts, s)
	}
	for _, h := range d.Holds {
		parts = append(parts, fmt.Sprintf("%s %d→%d held: %s", h.Operator, h.From, h.To, h.Reason))
	}
	if d.Skip != "" {
		parts = append(parts, "skipped: "+d.Skip)
	}
	if len(parts) == 0 {
		parts = append(parts, "no change")
	}
	return fmt.Sprintf("#%d %s %s", d.Seq, clock(d.At), strings.Join(parts, "; "))
}

// Rate renders a rate with three significant digits: 850, 9.1 K, 30 K, 1.2 M.
func Rate(v float64) string {
	unit := ""
	switch {
	case v >= 1e6:
		v, unit = v/1e6, " M"
	case v >= 1e3:
		v, unit = v/1e3, " K"
	}
	var s string
	switch {
	case v >= 100 || unit == "":
		s = fmt.Sprintf("%.0f", v)
	default:
		s = strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	}
	return s + unit
}

func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05")
}
