package ui

import (
	"time"

	"koala/dataplane/metrics"
)

// Steps after which a protocol's routes are swapped and only state still
// moves: while one of them runs, the reconfiguration is migrating.
var migratingSteps = map[string]bool{"await-migration": true}

// reconfigsFrom turns a job's step events (in time order) into its
// reconfigurations, in the order they began, each with its steps, status
// and current step as of now (decideStatus).
func reconfigsFrom(evs []metrics.ReconfigEvent, now time.Time, quiet time.Duration) []ReconfigView {
	var out []ReconfigView
	index := map[string]int{}
	last := map[string]time.Time{}
	for _, e := range evs {
		i, ok := index[e.ReconfigID]
		if !ok {
			i = len(out)
			index[e.ReconfigID] = i
			out = append(out, ReconfigView{ID: e.ReconfigID, Protocol: e.Protocol, Start: e.Time, BytesLeft: -1})
		}
		r := &out[i]
		if r.Protocol == "" {
			r.Protocol = e.Protocol
		}
		if e.Time.After(last[e.ReconfigID]) {
			last[e.ReconfigID] = e.Time
		}
		switch e.Phase {
		case metrics.PhaseStart:
			r.Steps = append(r.Steps, StepView{Name: e.Step, Phase: metrics.PhaseStart})
		case metrics.PhaseEnd, metrics.PhaseError:
			j := openStep(r.Steps, e.Step)
			if j < 0 { // its start was lost or is older than what was read
				r.Steps = append(r.Steps, StepView{Name: e.Step})
				j = len(r.Steps) - 1
			}
			r.Steps[j].Phase, r.Steps[j].Millis = e.Phase, e.Millis
			if e.Phase == metrics.PhaseError && r.Error == "" {
				r.Error = e.Step + ": " + e.Detail
			}
		}
	}
	for i := range out {
		r := &out[i]
		r.Status, r.Step = decideStatus(r.Steps, last[r.ID], now, quiet)
		end := now
		if r.Status == StatusDone || r.Status == StatusFailed {
			r.End, end = last[r.ID], last[r.ID]
		}
		r.Seconds = end.Sub(r.Start).Seconds()
		if r.Status == StatusDone {
			r.Progress = 1
		}
	}
	return out
}

// openStep is the index of the latest step named name that has not ended,
// or -1.
func openStep(steps []StepView, name string) int {
	for j := len(steps) - 1; j >= 0; j-- {
		if steps[j].Name == name && steps[j].Phase == metrics.PhaseStart {
			return j
		}
	}
	return -1
}

// decideStatus tells where a reconfiguration is from its steps and the
// time of its last event. A failed step fails it. A step that has started
// and not ended runs (an await-migration step: migrating). With every step
// ended it is done only once no new step began for quiet: the next step
// of a protocol starts right after the previous one ends, but its events
// reach ClickHouse a flush later, and neither ClickHouse nor the workers
// know which step is a protocol's last.
func decideStatus(steps []StepView, last, now time.Time, quiet time.Duration) (status, step string) {
	for _, s := range steps {
		if s.Phase == metrics.PhaseError {
			return StatusFailed, s.Name
		}
	}
	for j := len(steps) - 1; j >= 0; j-- {
		if steps[j].Phase == metrics.PhaseStart {
			if migratingSteps[steps[j].Name] {
				return StatusMigrating, steps[j].Name
			}
			return StatusRunning, steps[j].Name
		}
	}
	if len(steps) > 0 {
		step = steps[len(steps)-1].Name
	}
	if now.Sub(last) < quiet {
		return StatusRunning, step
	}
	return StatusDone, step
}

// migSecond sums one second of a job's migration columns.
type migSecond struct{ bytes, keys, klt uint64 }

// addMigration fills r's migration fields from the job's metric rows (in
// time order) and the keys still in the live tasks' lookup tables
// (keysLeft < 0: no worker answered; the rows' latest second counts
// then). Only the rows from r's start on count.
func addMigration(r *ReconfigView, rows []metrics.TaskRow, keysLeft int, now time.Time) {
	from := r.Start.Truncate(time.Second)
	var secs []int64
	per := map[int64]*migSecond{}
	for _, row := range rows {
		at := row.Time.Truncate(time.Second)
		if at.Before(from) || (!r.End.IsZero() && at.After(r.End)) {
			continue
		}
		s := per[at.Unix()]
		if s == nil {
			s = &migSecond{}
			per[at.Unix()] = s
			secs = append(secs, at.Unix())
		}
		s.bytes += row.BytesTransferred
		s.keys += row.KeysFetched
		s.klt += row.KLTSize
	}
	r.RateTime, r.RateBytes = nil, nil
	for _, sec := range secs {
		s := per[sec]
		r.BytesMoved += s.bytes
		r.KeysMoved += s.keys
		r.KeysPeak = max(r.KeysPeak, int(s.klt))
		r.RateTime = append(r.RateTime, sec)
		r.RateBytes = append(r.RateBytes, float64(s.bytes))
	}
	if keysLeft < 0 {
		keysLeft = 0
		if n := len(secs); n > 0 {
			keysLeft = int(per[secs[n-1]].klt)
		}
	}
	if r.Status == StatusDone || r.Status == StatusFailed {
		// Ended: its workflow no longer waits for keys, and what the
		// tables hold now belongs to a later reconfiguration (or to a
		// fetch-on-demand one, done once routes were swapped).
		keysLeft = 0
	}
	r.KeysLeft = keysLeft
	r.KeysPeak = max(r.KeysPeak, keysLeft)
	bytes := make(map[int64]float64, len(per))
	for sec, s := range per {
		bytes[sec] = float64(s.bytes)
	}
	r.Rate = recentRate(secs, bytes, now)
	switch {
	case keysLeft == 0:
		r.BytesLeft = 0
	case r.KeysMoved > 0:
		r.BytesLeft = float64(keysLeft) * float64(r.BytesMoved) / float64(r.KeysMoved)
	default:
		r.BytesLeft = -1
	}
	switch {
	case r.Status == StatusDone:
		r.Progress = 1
	case r.KeysPeak > 0:
		r.Progress = 1 - float64(keysLeft)/float64(r.KeysPeak)
	}
}

// recentRate is the mean of the values of the last (up to) three seconds
// that have rows, when the latest of them is at most 5 s old; 0 otherwise
// (nothing moved lately). Rows reach ClickHouse a second or two late, so
// the seconds right before now are often missing.
func recentRate(secs []int64, v map[int64]float64, now time.Time) float64 {
	n := len(secs)
	if n == 0 || now.Unix()-secs[n-1] > 5 {
		return 0
	}
	k := min(3, n)
	sum := 0.0
	for _, s := range secs[n-k:] {
		sum += v[s]
	}
	return sum / float64(k)
}
