package traces

import (
	"fmt"
	"math/rand/v2"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// Borg generator parameters.
const (
	// BorgDefaultSkew is the Zipf exponent over jobs when Skew is 0: a few
	// jobs with many tasks make most of the trace's events.
	BorgDefaultSkew = 1.1
	// BorgFirstJobID is the id of job index 0.
	BorgFirstJobID = 3418309
	// borgTraceStart is the time of event 0 (µs; the trace starts at 600 s).
	borgTraceStart = 600_000_000
	maxBorgJobs    = produce.MaxZipfKeys
)

// borgEventMix is the share (per mille) of each event type, roughly the
// trace's: submits, schedules and finishes dominate.
var borgEventMix = [borgEventTypes]int{
	BorgSubmit: 300, BorgSchedule: 290, BorgEvict: 40, BorgFail: 30, BorgFinish: 250,
	BorgKill: 60, BorgLost: 5, BorgUpdatePending: 10, BorgUpdateRunning: 15,
}

// BorgGenerator makes task events: the job of event n is drawn from a
// Zipf over NumKeys jobs, the event type from the trace's mix; a job's
// requests vary around its own level. Event n depends only on (seed, n).
type BorgGenerator struct {
	jobs keyIndex
	seed int64
	// seq: the warm-up stream, whose key index k is job k / 9 with event
	// type k mod 9, so the warm keys cover every event type of the first
	// NumKeys/9 jobs (the keys a measurement run over them touches).
	seq bool
}

// NewBorgGenerator returns the generator of req (NumKeys jobs, Skew, Seed).
func NewBorgGenerator(req control.ProduceRequest) (*BorgGenerator, error) {
	z, err := traceKeys(Borg, req, BorgDefaultSkew, maxBorgJobs)
	if err != nil {
		return nil, err
	}
	return &BorgGenerator{jobs: z, seed: req.Seed, seq: req.Sequential}, nil
}

// Event is event n.
func (g *BorgGenerator) Event(n int64) TaskEvent {
	k := g.jobs.Index(g.seed, n)
	rng := rand.New(rand.NewPCG(uint64(g.seed)^0xb0e9, uint64(n)))
	p, t := rng.IntN(1000), 0
	for t = 0; t < borgEventTypes-1 && p >= borgEventMix[t]; t++ {
		p -= borgEventMix[t]
	}
	if g.seq {
		k, t = k/borgEventTypes, k%borgEventTypes
	}
	h := uint64(k)*0x9e3779b97f4a7c15 + 1
	cpuLevel := 0.00625 * float64(1+h%40) // the job's usual request: 0.6–25 % of a machine
	ramLevel := 0.0031 * float64(1+(h>>8)%60)
	e := TaskEvent{
		Time:       borgTraceStart + n*1000,
		JobID:      BorgFirstJobID + int64(k)*7,
		TaskIndex:  int64(rng.IntN(1 + int(h>>16)%500)),
		EventType:  t,
		User:       fmt.Sprintf("u%05d", (h>>24)%5000),
		SchedClass: int((h >> 32) % 4),
		Priority:   int((h >> 36) % 12),
		CPU:        round6(cpuLevel * (0.8 + 0.4*rng.Float64())),
		RAM:        round6(ramLevel * (0.8 + 0.4*rng.Float64())),
		Disk:       round6(0.0001 * float64(1+rng.IntN(40))),
		Constraint: rng.IntN(2),
	}
	if t != BorgSubmit {
		e.MachineID = 1 + rng.Int64N(12500)
	}
	return e
}

// Next fills r with event n keyed by job and event type.
func (g *BorgGenerator) Next(n int64, r *dataplane.Record) {
	e := g.Event(n)
	r.Key = append(r.Key[:0], e.Key()...)
	r.Value = e.CSV()
	r.EventTime = time.Now().UnixNano()
	r.Partition, r.Offset = 0, 0
}

func round6(v float64) float64 { return float64(int64(v*1e6+0.5)) / 1e6 }

func init() {
	registerTrace(&trace{name: Borg, key: borgKey}, func(req control.ProduceRequest) (produce.Generator, error) {
		return NewBorgGenerator(req)
	})
}
