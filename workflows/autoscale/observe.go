package autoscale

import (
	"slices"
	"strings"
	"time"

	"koala/dataplane/metrics"
)

// Observation is every operator's load over one metrics window [From, To).
type Observation struct {
	From      time.Time      `json:"from"`
	To        time.Time      `json:"to"`
	Operators []OperatorLoad `json:"operators"`
	// Incomplete names the tasks whose rows for the window's last second
	// had not arrived by the deadline (the window was used as it was).
	Incomplete []string `json:"incomplete,omitempty"`
}

// Seconds is the window's length.
func (o Observation) Seconds() float64 { return o.To.Sub(o.From).Seconds() }

// Operator returns the named operator's load.
func (o Observation) Operator(name string) (OperatorLoad, bool) {
	for _, l := range o.Operators {
		if l.Operator == name {
			return l, true
		}
	}
	return OperatorLoad{}, false
}

// OperatorLoad is one operator's metrics over a window, summed over its
// tasks. Rates are per second of the window.
type OperatorLoad struct {
	Operator string `json:"operator"`
	// Tasks is how many tasks reported in the window.
	Tasks int `json:"tasks"`
	// RecordsIn and RecordsOut are the operator's input and output rates.
	RecordsIn  float64 `json:"records_in"`
	RecordsOut float64 `json:"records_out"`
	// Busy is the operator's busy time per second, in task-seconds: each
	// task's batch processing time (batches × average batch time), but no
	// more than the time it neither waited for input nor for its
	// downstream (busySeconds).
	Busy float64 `json:"busy"`
	// LagStart and LagEnd are a source's Kafka lag (summed over its tasks)
	// at the first and last second each task reported in the window.
	LagStart float64 `json:"lag_start,omitempty"`
	LagEnd   float64 `json:"lag_end,omitempty"`
}

// TrueRate is the records one task processes per second of busy time
// (0: unknown, the operator was never busy in the window).
func (l OperatorLoad) TrueRate() float64 {
	if !(l.Busy > 0) {
		return 0
	}
	return l.RecordsIn / l.Busy
}

// Selectivity is the records out per record in (1 without input).
func (l OperatorLoad) Selectivity() float64 {
	if !(l.RecordsIn > 0) {
		return 1
	}
	return l.RecordsOut / l.RecordsIn
}

// Utilization is the busy fraction of the operator's tasks.
func (l OperatorLoad) Utilization() float64 {
	if l.Tasks == 0 {
		return 0
	}
	return l.Busy / float64(l.Tasks)
}

// busySeconds is the busy time one row reports, in seconds, at most the
// second it covers: the batches' processing time, capped by the part of
// the second the task neither waited for input (IdleRatio) nor for a
// full downstream (BackpressureRatio), as DS2's useful time.
//
// Both caps matter. A processing task's backpressure falls inside its
// batches (it blocks handing a batch's output on), so its batch time
// overstates its work and 1 − idle − backpressure is the smaller. A
// source's backpressure is its wait for credit between batches, so there
// the batch time is the smaller, and subtracting the backpressure from
// it would leave the source no busy time (no true rate) exactly when
// its downstream is saturated. Rows of workers that did not measure the
// ratios (both 0) give the batch time.
func busySeconds(r metrics.TaskRow) float64 {
	busy := float64(r.Batches) * r.BatchTimeAvgUs / 1e6
	if useful := 1 - r.IdleRatio - r.BackpressureRatio; useful < busy {
		busy = useful
	}
	return min(max(busy, 0), 1)
}

// Aggregate sums the rows of job in [from, to) per operator (operators
// in name order). A row belongs to the second its Time is in.
func Aggregate(rows []metrics.TaskRow, job string, from, to time.Time) Observation {
	obs := Observation{From: from, To: to}
	secs := to.Sub(from).Seconds()
	if !(secs > 0) {
		return obs
	}
	type taskLag struct {
		first, last       time.Time
		firstLag, lastLag uint64
	}
	type acc struct {
		load  OperatorLoad
		tasks []string
		lags  []taskLag // by index in tasks
	}
	var ops []*acc
	byName := func(name string) *acc {
		for _, a := range ops {
			if a.load.Operator == name {
				return a
			}
		}
		a := &acc{load: OperatorLoad{Operator: name}}
		ops = append(ops, a)
		return a
	}
	for _, r := range rows {
		at := r.Time.Truncate(time.Second)
		if r.Job != job || at.Before(from) || !at.Before(to) {
			continue
		}
		a := byName(r.Operator)
		a.load.RecordsIn += float64(r.RecordsIn)
		a.load.RecordsOut += float64(r.RecordsOut)
		a.load.Busy += busySeconds(r)
		i := slices.Index(a.tasks, r.Task)
		if i < 0 {
			a.tasks = append(a.tasks, r.Task)
			a.lags = append(a.lags, taskLag{first: at, last: at, firstLag: r.KafkaLag, lastLag: r.KafkaLag})
			continue
		}
		l := &a.lags[i]
		if at.Before(l.first) {
			l.first, l.firstLag = at, r.KafkaLag
		}
		if !at.Before(l.last) {
			l.last, l.lastLag = at, r.KafkaLag
		}
	}
	slices.SortFunc(ops, func(a, b *acc) int { return strings.Compare(a.load.Operator, b.load.Operator) })
	for _, a := range ops {
		l := a.load
		l.Tasks = len(a.tasks)
		l.RecordsIn /= secs
		l.RecordsOut /= secs
		l.Busy /= secs
		for _, tl := range a.lags {
			l.LagStart += float64(tl.firstLag)
			l.LagEnd += float64(tl.lastLag)
		}
		obs.Operators = append(obs.Operators, l)
	}
	return obs
}

// Missing lists (sorted) the tasks of job that reported in [from, to)
// but not at or after to−1 s: their rows for the window's last second
// have not arrived yet. Empty when the window's data is complete, or when
// no task reported at all.
func Missing(rows []metrics.TaskRow, job string, from, to time.Time) []string {
	last := to.Add(-time.Second)
	var seen, done []string
	for _, r := range rows {
		at := r.Time.Truncate(time.Second)
		if r.Job != job || at.Before(from) {
			continue
		}
		if !slices.Contains(seen, r.Task) {
			seen = append(seen, r.Task)
		}
		if !at.Before(last) && !slices.Contains(done, r.Task) {
			done = append(done, r.Task)
		}
	}
	var out []string
	for _, t := range seen {
		if !slices.Contains(done, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}
