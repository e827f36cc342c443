package dataplane

import (
	"fmt"
	"time"

	"koala/dataplane/control"
)

// Source partition idleness
//
// A partition that delivers nothing stops holding its source's watermark
// back (it is idle, watermark.go) only when the source knows it has read
// everything the partition holds: nothing came from it for
// SourceIdleTimeoutMs, and a fresh end offset — looked up at most
// endOffsetMaxAge ago by the source's periodic ListOffsets lookup, or
// reported by a fetch — shows the source at or past it.
//
// Silence alone is not enough. While the Kafka broker is down or
// restarting no partition delivers anything and producers keep their
// records; when it is back they arrive with event times from the outage,
// one partition before another. Had the silent partitions counted as idle,
// the first partition to deliver its backlog would carry the watermark past
// the records the others were about to deliver, and those would be dropped
// as late. A partition whose end offset the source cannot look up is
// therefore held non-idle for as long as the lookups fail. During an
// outage of the whole broker this costs nothing: no input arrives, and the
// windows the held watermark keeps open are those between the partitions'
// progress at the start of the outage, which fire once it is over.
//
// The hold has a bound where it does cost something: a partition whose end
// offset stays unknown while the same source task does get fresh end
// offsets of its other partitions (that partition alone is unavailable,
// e.g. its leader is down) is held for SourceOutageGraceMs (default 10 s)
// from the moment the others were reachable again, then judged by silence
// and its last known end offset as before, so one unavailable partition
// does not stall every window of the job for as long as it stays
// unavailable. Records it delivers behind the watermark later are late
// (the window operators count them as late_records). The source task looks
// only at its own partitions: one whose partitions are all unavailable is
// held until they are back.

// DefaultSourceOutageGrace is how long a partition whose end offset cannot
// be looked up holds the watermark while its source reaches its other
// partitions.
const DefaultSourceOutageGrace = 10 * time.Second

// Refresh of the source partitions' end offsets (source.go trackLag). An
// end offset counts as fresh for endOffsetMaxAge: three refreshes, so one
// slow or failed lookup on a healthy broker does not hold the watermark.
const (
	endOffsetRefresh = time.Second
	endOffsetMaxAge  = 3 * endOffsetRefresh
)

// partitionState is what partitionIdle decides from, for one partition.
type partitionState struct {
	// Quiet is how long nothing came from the partition.
	Quiet time.Duration
	// EndKnown: an end offset was ever seen; CaughtUp: the source's next
	// offset is at or past the latest one seen; EndAge: how long ago it
	// was looked up (or fetched).
	EndKnown bool
	CaughtUp bool
	EndAge   time.Duration
	// Stranded is how long the partition's end offset has been stale while
	// the source had fresh end offsets of other partitions (0: not so).
	Stranded time.Duration
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
	if p.Quiet <= r.IdleTimeout {
		return false // it delivered recently
	}
	if p.EndKnown && p.EndAge <= r.EndMaxAge {
		return p.CaughtUp // a fresh end offset says whether anything is left
	}
	if p.Stranded > r.OutageGrace {
		// Unavailable alone for longer than the grace: judged by what is
		// known, so it does not stall the job.
		return !p.EndKnown || p.CaughtUp
	}
	return false // the end offset is stale or unknown: maybe an outage
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
