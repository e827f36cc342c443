package plan

import "fmt"

// CheckDirections reports an error when a task of p both gives and gains
// buckets. The dataplane relies on it never happening within one
// reconfiguration: an old owner's task goroutine forwards in-flight
// records to the new owner and waits when that inbox (or the handoff
// queue, dataplane/handoff_queue.go) is full, so two tasks forwarding to
// each other could each wait on the other for good. Every planner here
// keeps to it; the check turns a planner that does not into an error
// instead of a stalled job.
func (p Plan) CheckDirections() error {
	gives := map[string]bool{}
	for _, pm := range p.MovesByPair {
		gives[pm.From] = true
	}
	for _, pm := range p.MovesByPair {
		if gives[pm.To] {
			return fmt.Errorf("plan for operator %q: task %s would both give and gain buckets (it gains %v from %s); a reconfiguration moves buckets one way per task", p.Operator, pm.To, pm.Buckets, pm.From)
		}
	}
	return nil
}
