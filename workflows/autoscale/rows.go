package autoscale

import "koala/dataplane/metrics"

// Actions of a decision row (metrics.AutoscaleRow.Action).
const (
	ActionScaleOut = "scale-out"
	ActionScaleIn  = "scale-in"
	ActionHold     = "hold"
	ActionNone     = "none"
)

// Rows renders a decision as one row per operator for the
// autoscale_decisions table: its inputs, DS2's target and the action.
func (d Decision) Rows(job, autoscaler string) []metrics.AutoscaleRow {
	out := make([]metrics.AutoscaleRow, 0, len(d.Estimates))
	for _, e := range d.Estimates {
		r := metrics.AutoscaleRow{
			Time: d.At, WindowFrom: d.From, Job: job, Autoscaler: autoscaler, Seq: uint64(max(d.Seq, 0)), Operator: e.Operator,
			Action: ActionNone, From: uint64(e.Current), To: uint64(e.Current), Target: uint64(e.Target), RawTarget: e.Raw,
			TrueRate: e.TrueRate, InputRate: e.Input, ObservedRate: e.Observed, Arrival: e.Arrival, KafkaLag: e.Lag, Utilization: e.Utilization,
		}
		if e.NoData {
			r.Detail = "no data: never busy in the window"
		}
		for _, c := range d.Changes {
			if c.Operator == e.Operator {
				r.Action, r.To, r.Outcome, r.Detail = ActionScaleIn, uint64(c.To), c.Result(), c.Summary
				if c.To > c.From {
					r.Action = ActionScaleOut
				}
			}
		}
		for _, h := range d.Holds {
			if h.Operator == e.Operator {
				r.Action, r.Detail = ActionHold, h.Reason
			}
		}
		out = append(out, r)
	}
	return out
}
