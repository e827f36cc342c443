package dataplane

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"koala/dataplane/control"
)

// Source read-ahead
//
// The queues between tasks are bounded in frames (task inboxes, exchange
// peer queues, gRPC windows), and a frame holds up to a whole batch, so
// without a bound of its own a source could hand hundreds of thousands of
// records to a slow pipeline while Kafka showed no lag at all. A source
// task therefore reads on credit: every data frame it sends carries the
// batch's sequence number (wire.Frame.Seq), the receiving task returns it
// in a FrameCredit once it processed the frame (credit_return.go), and the
// source polls Kafka only while the records its downstream has not yet
// processed stay below ReadAhead.MaxInFlightRecords. Those records count
// as Kafka lag, so a growing backlog shows there instead of hiding inside
// the pipeline.

// ReadAhead bounds how far a source task reads ahead of its downstream.
type ReadAhead struct {
	// MaxInFlightRecords is the most records a source task has handed to
	// one downstream operator that its tasks have not yet processed (job
	// parameter SourceMaxInFlightRecords).
	MaxInFlightRecords int
}

// Validate reports a bound out of range, naming the job parameter.
func (r ReadAhead) Validate() error {
	if r.MaxInFlightRecords < 1 || r.MaxInFlightRecords > control.MaxSourceMaxInFlightRecords {
		return fmt.Errorf("job param %s %d: want between 1 and %d records", control.ParamSourceMaxInFlightRecords, r.MaxInFlightRecords, control.MaxSourceMaxInFlightRecords)
	}
	return nil
}

// ReadAheadOf reads a job's read-ahead bound: its SourceMaxInFlightRecords,
// by default control.DefaultSourceInFlightBatches batches of BatchSize.
func ReadAheadOf(job control.JobSpec) (ReadAhead, error) {
	r := ReadAhead{MaxInFlightRecords: min(control.DefaultSourceInFlightBatches*max(job.BatchSize, 1), control.MaxSourceMaxInFlightRecords)}
	if s := job.Params[control.ParamSourceMaxInFlightRecords]; s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return r, fmt.Errorf("job param %s %q: want a whole number of records: %w", control.ParamSourceMaxInFlightRecords, s, err)
		}
		r.MaxInFlightRecords = n
	}
	return r, r.Validate()
}

// sourceCredit is a source task's account of the data frames it sent and
// their receivers have not yet acknowledged. The source goroutine records
// each batch; acknowledgements arrive from other goroutines (local tasks,
// the exchange server).
type sourceCredit struct {
	limit int
	// wake has room for one signal: an acknowledgement freed credit.
	wake chan struct{}

	mu sync.Mutex
	// seq is the last batch number used. It starts at the creation time in
	// nanoseconds, so acknowledgements meant for an earlier instance of
	// the same task id (a redeployed job) are below every number in use.
	seq     uint64
	targets map[string]*creditTarget // by receiving task id
	// inFlight is the records not yet acknowledged per downstream
	// operator: each one gets every record, so each is bounded alone.
	inFlight map[string]int
	peak     int // the largest in-flight count so far
}

// creditTarget is one receiving task's unacknowledged frames, in sending
// order: a task processes one sender's frames in order, so an
// acknowledgement of number s covers every frame up to s.
type creditTarget struct {
	op     string
	frames []sentFrame
}

type sentFrame struct {
	seq uint64
	n   int
}

func newSourceCredit(r ReadAhead) *sourceCredit {
	return &sourceCredit{
		limit: r.MaxInFlightRecords, wake: make(chan struct{}, 1),
		seq: uint64(time.Now().UnixNano()), targets: map[string]*creditTarget{}, inFlight: map[string]int{},
	}
}

// room is how many more records the source may read now.
func (c *sourceCredit) room() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limit - c.maxInFlightLocked()
}

// ready reports whether the source may poll a batch of up to batch
// records now. It waits for room for a whole batch (or the whole bound,
// when smaller): polling into every sliver of freed credit would shrink
// the batches exactly when the pipeline is the bottleneck, and each batch
// costs the operators after it a fixed amount.
func (c *sourceCredit) ready(batch int) bool {
	return c.room() >= min(max(batch, 1), c.limit)
}

// records is the in-flight count of the downstream operator furthest
// behind: what the source read that the pipeline has not yet taken.
func (c *sourceCredit) records() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxInFlightLocked()
}

func (c *sourceCredit) maxInFlightLocked() int {
	m := 0
	for _, n := range c.inFlight {
		m = max(m, n)
	}
	return m
}

// record numbers the pending output frames of one source batch and
// accounts for them; it runs before they are delivered, so no
// acknowledgement can come first.
func (c *sourceCredit) record(o *outputs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	for _, id := range o.order {
		f := o.pending[id]
		f.Seq = c.seq
		tg := c.targets[id]
		if tg == nil {
			tg = &creditTarget{op: o.targets[id].Operator}
			c.targets[id] = tg
		}
		tg.frames = append(tg.frames, sentFrame{seq: c.seq, n: len(f.Records)})
		c.inFlight[tg.op] += len(f.Records)
	}
	c.peak = max(c.peak, c.maxInFlightLocked())
}

// ack takes task from's acknowledgement of every frame up to seq.
// Repeated, stale and unknown acknowledgements change nothing.
func (c *sourceCredit) ack(from string, seq uint64) {
	c.mu.Lock()
	tg := c.targets[from]
	if tg == nil {
		c.mu.Unlock()
		return
	}
	i := 0
	for i < len(tg.frames) && tg.frames[i].seq <= seq {
		c.inFlight[tg.op] -= tg.frames[i].n
		i++
	}
	if i > 0 {
		// Shift rather than reslice, so the array is reused, not regrown.
		tg.frames = tg.frames[:copy(tg.frames, tg.frames[i:])]
	}
	c.mu.Unlock()
	if i > 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// prune forgets the frames sent to tasks that dep no longer has: a task
// removed by a reconfiguration acknowledges what it processed before it
// stopped, and nothing it never acknowledges may hold the source back.
func (c *sourceCredit) prune(dep control.Deployment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.targets) == 0 {
		return
	}
	live := make(map[string]bool, len(dep.Tasks))
	for _, t := range dep.Tasks {
		live[t.ID] = true
	}
	for id, tg := range c.targets {
		if live[id] {
			continue
		}
		for _, f := range tg.frames {
			c.inFlight[tg.op] -= f.n
		}
		delete(c.targets, id)
	}
}

// counters reports the read-ahead figures for Worker.OperatorCounters.
func (c *sourceCredit) counters() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return map[string]uint64{
		"source_in_flight":       uint64(c.maxInFlightLocked()),
		"source_in_flight_peak":  uint64(c.peak),
		"source_in_flight_limit": uint64(c.limit),
	}
}
