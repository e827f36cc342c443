package produce

import "koala/dataplane/control"

// SplitProduce divides one produce request among n parallel producers, the
// way an experiment's producers share its input: the rate (RatePerSec) and
// the event budget (MaxEvents) are split as evenly as whole numbers allow,
// each producer gets its own seed (Seed+i) so their streams differ and its
// index (Producer) so that two of them can run on one worker, and a
// rate schedule (RateLimit) applies to each producer in full, as in the
// artifact. Trace files are dealt out round-robin so that no file is read
// twice; with fewer files than producers only one producer per file runs.
func SplitProduce(req control.ProduceRequest, n int) []control.ProduceRequest {
	n = max(n, 1)
	if len(req.FilePath) > 0 {
		n = min(n, len(req.FilePath))
	}
	out := make([]control.ProduceRequest, n)
	for i := range out {
		r := req
		r.Seed = req.Seed + int64(i)
		r.Producer = i
		r.RatePerSec = req.RatePerSec / n
		if i < req.RatePerSec%n {
			r.RatePerSec++
		}
		r.MaxEvents = req.MaxEvents / int64(n)
		if int64(i) < req.MaxEvents%int64(n) {
			r.MaxEvents++
		}
		if len(req.FilePath) > 0 {
			r.FilePath = nil
			for j := i; j < len(req.FilePath); j += n {
				r.FilePath = append(r.FilePath, req.FilePath[j])
			}
		}
		out[i] = r
	}
	return out
}
