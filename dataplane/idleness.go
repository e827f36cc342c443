package dataplane

import (
	"fmt"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
)

// Source partition idleness
//
// A partition that delivers nothing stops holding its source's watermark
// back (it is idle, watermark.go) only when the source knows it has read
// everything the partition holds: nothing came from it for
// SourceIdleTimeoutMs, and a fresh end offset shows the source at or past
// it. Fresh means looked up (the source's ListOffsets lookup, every
// endOffsetRefresh) at most endOffsetMaxAge ago and after the partition
// last delivered or was woken (watermark.go), so a burst appended
// together with another partition's is seen.
//
// Silence alone is not enough. While the Kafka broker is down or
// restarting no partition delivers anything and producers keep their
// records; when it is back they arrive with event times from the outage,
// one partition before another — a batch that was in flight when the
// broker died is retried seconds after the producer's buffered ones. Had
// the silent partitions counted as idle, the first partition to deliver
// its backlog would carry the watermark past the records the others were
// about to deliver, and those would be dropped as late. So:
//
//   - a partition whose end offset cannot be looked up (stale, the lookups
//     fail) is not idle;
//   - a partition that went through such an outage stays in it until it
//     delivers a record appended after the outage began — past the first
//     end offset looked up after it, since the broker may have appended
//     records after the source's last fetch before it died — (producers
//     keep a partition's order, so its held records came before), however
//     fresh its end offsets are again: a lookup cannot see records a
//     producer still holds.
//
// During an outage of the whole broker this costs nothing: no input
// arrives, and the windows the held watermark keeps open are those between
// the partitions' progress when it began. The hold ends, for a partition
// still in an outage, SourceOutageGraceMs (default 10 s) after the source
// reaches the broker again (fresh end offsets of any of its partitions):
// from then on it is judged by silence and its last known end offset, so
// a partition nothing is written to any more, or one that alone stays
// unavailable (its leader is down), does not stall every window of the
// job. Records it delivers behind the watermark after that are late (the
// window operators count them as late_records). A source task judges only
// by its own partitions: one whose partitions are all unavailable holds
// until they are back.

// DefaultSourceOutageGrace is how long after its source reaches the broker
// again a partition that went through an outage, and delivered nothing
// since, keeps holding the watermark.
const DefaultSourceOutageGrace = 10 * time.Second

// Refresh of the source partitions' end offsets (source.go trackLag). An
// end offset counts as fresh for endOffsetMaxAge: three refreshes, so one
// slow lookup on a healthy broker is no outage.
const (
	endOffsetRefresh = time.Second
	endOffsetMaxAge  = 3 * endOffsetRefresh
)

// partitionState is what partitionIdle decides from, for one partition.
type partitionState struct {
	// Quiet is how long nothing came from the partition.
	Quiet time.Duration
	// EndKnown: an end offset was ever seen; CaughtUp: the source's next
	// offset is at or past the latest one seen; Fresh: the latest one was
	// looked up at most EndMaxAge ago and after the partition last
	// delivered or was woken.
	EndKnown bool
	CaughtUp bool
	Fresh    bool
	// InOutage: its end offset went stale and it delivered nothing
	// appended since; HeldFor: how long the source has reached the broker
	// again meanwhile (0: not yet).
	InOutage bool
	HeldFor  time.Duration
}

// idleRule holds the job's idleness parameters.
type idleRule struct {
	IdleTimeout time.Duration // SourceIdleTimeoutMs
	OutageGrace time.Duration // SourceOutageGraceMs
	EndMaxAge   time.Duration // endOffsetMaxAge
}

// partitionIdle decides whether a partition stops holding the watermark
// back (the rule above).
func partitionIdle(r idleRule, p partitionState) bool {
	switch {
	case p.Quiet <= r.IdleTimeout:
		return false // it delivered recently
	case p.InOutage && p.HeldFor <= r.OutageGrace:
		return false // a producer may still hold records for it
	case p.InOutage:
		return !p.EndKnown || p.CaughtUp // past the grace: what is known
	}
	return p.Fresh && p.CaughtUp
}

// partitionOutage is one partition's outage, from its end offset going
// stale until it delivers a record past end.
//
// end is the partition's first end offset looked up after the outage
// (fresh: set), not the last one seen before it: records the broker
// appended just before it died, after the source's last fetch, lie past
// the old end and arrive first after the restart, while the producer's
// in-flight batch of the same partition may be retried seconds later.
// Only a record past an end looked up after the outage was certainly
// appended after it began, and so after everything the producers held.
type partitionOutage struct {
	end     int64
	fresh   bool      // end was looked up after the outage began
	reached time.Time // when the source reached the broker again; zero: not yet
}

// outages tracks the source partitions' outages (source goroutine only).
type outages map[int32]*partitionOutage

// note updates partition pp's outage at now — stale: its end offset is
// stale; reached: the source has a fresh end offset of some partition —
// and returns whether it is in one and for how long the source has
// reached the broker meanwhile.
func (o outages) note(pp kafkaio.PartitionPos, stale, reached bool, now time.Time) (bool, time.Duration) {
	out, in := o[pp.Partition]
	if in && !out.fresh && !stale {
		out.end, out.fresh = pp.HighWatermark, true
	}
	if in && out.fresh && pp.Next > out.end {
		delete(o, pp.Partition) // it delivered what was appended after the outage began
		in = false
	}
	if !in {
		if !stale {
			return false, 0
		}
		out = &partitionOutage{} // end: looked up once the broker answers again
		o[pp.Partition] = out
	}
	if !reached {
		return true, 0
	}
	if out.reached.IsZero() {
		out.reached = now
	}
	return true, now.Sub(out.reached)
}

// sourceIdleRule reads a job's SourceIdleTimeoutMs (> 0) and
// SourceOutageGraceMs (≥ 0); errors name the parameter.
func sourceIdleRule(params map[string]string) (idleRule, error) {
	idle, err := durationParam(params, control.ParamSourceIdleTimeout, DefaultSourceIdleTimeout)
	if err != nil || idle <= 0 {
		return idleRule{}, fmt.Errorf("%s %q: want a whole number of milliseconds > 0", control.ParamSourceIdleTimeout, params[control.ParamSourceIdleTimeout])
	}
	grace, err := durationParam(params, control.ParamSourceOutageGrace, DefaultSourceOutageGrace)
	if err != nil {
		return idleRule{}, err
	}
	return idleRule{IdleTimeout: idle, OutageGrace: grace, EndMaxAge: endOffsetMaxAge}, nil
}
