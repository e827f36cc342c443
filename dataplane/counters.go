package dataplane

import "maps"

// OperatorCounters returns, per task of job on this worker, the counters of
// operators that report them (CounterReporter): late records, malformed
// input and the like; and of source tasks, their read-ahead
// (source_in_flight, its peak and its limit; source_credit.go).
func (w *Worker) OperatorCounters(jobID string) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, t := range w.jobTasks(jobID, nil) {
		var cs map[string]uint64
		if c, ok := t.op.(CounterReporter); ok {
			cs = c.Counters()
		}
		if t.source != nil {
			if cs == nil {
				cs = map[string]uint64{}
			}
			maps.Copy(cs, t.source.credit.counters())
		}
		if t.dead != nil {
			if dc := t.dead.Counts(); !dc.IsZero() {
				if cs == nil {
					cs = map[string]uint64{}
				}
				maps.Copy(cs, dc.Counters())
			}
		}
		if cs != nil {
			out[t.id] = cs
		}
	}
	return out
}
