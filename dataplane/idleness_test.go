package dataplane

import (
	"strings"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
)

func TestPartitionIdle(t *testing.T) {
	rule := idleRule{IdleTimeout: time.Second, OutageGrace: 10 * time.Second, EndMaxAge: 3 * time.Second}
	const s = time.Second
	for _, c := range []struct {
		name string
		p    partitionState
		want bool
	}{
		{"delivered recently", partitionState{Quiet: s / 2, EndKnown: true, CaughtUp: true, Fresh: true}, false},
		{"at the timeout exactly", partitionState{Quiet: s, EndKnown: true, CaughtUp: true, Fresh: true}, false},
		{"quiet, fresh end, caught up", partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: true, Fresh: true}, true},
		{"quiet, fresh end, backlog", partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: false, Fresh: true}, false},
		// The last lookup is too old, or older than the partition's last
		// activity: records appended since are not in it.
		{"quiet, end not fresh, caught up", partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: true}, false},
		{"never looked up", partitionState{Quiet: 30 * s}, false},
		{"only a fetch's end", partitionState{Quiet: 30 * s, EndKnown: true, CaughtUp: true}, false},
		// The broker is down: lookups fail.
		{"outage, broker still down", partitionState{Quiet: time.Minute, EndKnown: true, CaughtUp: true, InOutage: true}, false},
		{"outage, long, broker still down", partitionState{Quiet: time.Hour, EndKnown: true, CaughtUp: true, InOutage: true}, false},
		// Back: its lookups are fresh, it says caught up, yet a producer
		// may still hold records for it.
		{"after an outage, within the grace", partitionState{Quiet: time.Minute, EndKnown: true, CaughtUp: true, Fresh: true, InOutage: true, HeldFor: 5 * s}, false},
		{"after an outage, at the grace exactly", partitionState{Quiet: time.Minute, EndKnown: true, CaughtUp: true, Fresh: true, InOutage: true, HeldFor: 10 * s}, false},
		{"after an outage, past the grace", partitionState{Quiet: time.Minute, EndKnown: true, CaughtUp: true, Fresh: true, InOutage: true, HeldFor: 11 * s}, true},
		{"after an outage, past the grace, backlog", partitionState{Quiet: time.Minute, EndKnown: true, CaughtUp: false, Fresh: true, InOutage: true, HeldFor: 11 * s}, false},
		// Unavailable alone (others answer): judged by what is known after the grace.
		{"alone unavailable, past the grace", partitionState{Quiet: time.Minute, EndKnown: true, CaughtUp: true, InOutage: true, HeldFor: 11 * s}, true},
		{"alone unavailable, past the grace, never known", partitionState{Quiet: time.Minute, InOutage: true, HeldFor: 11 * s}, true},
		{"in an outage but delivering", partitionState{Quiet: s / 2, EndKnown: true, CaughtUp: true, InOutage: true, HeldFor: time.Minute}, false},
	} {
		if got := partitionIdle(rule, c.p); got != c.want {
			t.Errorf("%s: partitionIdle(%+v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
	// A zero grace: judged as soon as the source reaches the broker.
	zero := rule
	zero.OutageGrace = 0
	if !partitionIdle(zero, partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: true, Fresh: true, InOutage: true, HeldFor: time.Millisecond}) {
		t.Error("grace 0: a quiet, caught-up partition after an outage should be idle")
	}
}

// An outage begins when a partition's end offset goes stale, its grace
// counts from when the source reaches the broker again, and it ends only
// when the partition delivers past the first end looked up after it.
func TestOutages(t *testing.T) {
	o := outages{}
	t0 := time.Unix(1000, 0)
	at := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	pos := func(next, end int64) kafkaio.PartitionPos {
		return kafkaio.PartitionPos{Partition: 3, Next: next, HighWatermark: end, Known: true}
	}
	check := func(step string, gotIn bool, gotHeld time.Duration, wantIn bool, wantHeld time.Duration) {
		t.Helper()
		if gotIn != wantIn || gotHeld != wantHeld {
			t.Errorf("%s: in outage %v held %s, want %v %s", step, gotIn, gotHeld, wantIn, wantHeld)
		}
	}
	in, held := o.note(pos(10, 10), false, true, at(0))
	check("healthy", in, held, false, 0)
	in, held = o.note(pos(10, 10), true, false, at(4))
	check("lookups fail", in, held, true, 0)
	in, held = o.note(pos(10, 10), true, false, at(20))
	check("still down", in, held, true, 0)
	in, held = o.note(pos(10, 10), false, true, at(25))
	check("back, fresh and caught up", in, held, true, 0)
	in, held = o.note(pos(10, 10), false, true, at(30))
	check("back for 5 s", in, held, true, 5*time.Second)
	in, held = o.note(pos(10, 14), false, true, at(31))
	check("its held records appended, not yet read", in, held, true, 6*time.Second)
	in, held = o.note(pos(14, 14), false, true, at(32))
	check("delivered them", in, held, false, 0)
	if len(o) != 0 {
		t.Errorf("outage kept after it ended: %v", o)
	}
	// Records appended just before the broker died, after the source's
	// last fetch (end 14 then, 16 in the log), come first after the
	// restart; the producer's in-flight batch (16-19) is retried later.
	// Reading 14 and 15 does not end the outage: only a record past the
	// end looked up after it (16) does.
	in, held = o.note(pos(14, 14), true, false, at(60))
	check("down again", in, held, true, 0)
	in, held = o.note(pos(14, 16), false, true, at(70))
	check("back: records from before the crash not read yet", in, held, true, 0)
	in, held = o.note(pos(16, 16), false, true, at(71))
	check("read the records from before the crash", in, held, true, time.Second)
	in, held = o.note(pos(16, 19), false, true, at(73))
	check("in-flight batch retried, not read yet", in, held, true, 3*time.Second)
	in, held = o.note(pos(19, 19), false, true, at(74))
	check("read the retried batch", in, held, false, 0)
	// Unavailable alone: stale, while others are fresh.
	in, held = o.note(pos(19, 19), true, true, at(80))
	check("alone stale", in, held, true, 0)
	in, held = o.note(pos(19, 19), true, true, at(92))
	check("alone stale for 12 s", in, held, true, 12*time.Second)
}

func TestSourceIdleRuleParams(t *testing.T) {
	r, err := sourceIdleRule(nil)
	if err != nil || r.IdleTimeout != DefaultSourceIdleTimeout || r.OutageGrace != DefaultSourceOutageGrace || r.EndMaxAge != endOffsetMaxAge {
		t.Fatalf("defaults: %+v, %v", r, err)
	}
	r, err = sourceIdleRule(map[string]string{control.ParamSourceIdleTimeout: "250", control.ParamSourceOutageGrace: "0"})
	if err != nil || r.IdleTimeout != 250*time.Millisecond || r.OutageGrace != 0 {
		t.Fatalf("250/0: %+v, %v", r, err)
	}
	for _, bad := range []struct{ name, value string }{
		{control.ParamSourceOutageGrace, "-1"},
		{control.ParamSourceOutageGrace, "ten"},
		{control.ParamSourceIdleTimeout, "0"},
		{control.ParamSourceIdleTimeout, "-5"},
	} {
		_, err := sourceIdleRule(map[string]string{bad.name: bad.value})
		if err == nil || !strings.Contains(err.Error(), bad.name) {
			t.Errorf("%s=%s: error %v, want one naming %s", bad.name, bad.value, err, bad.name)
		}
	}
}
