package dataplane

import (
	"strings"
	"testing"
	"time"

	"koala/dataplane/control"
)

func TestPartitionIdle(t *testing.T) {
	rule := idleRule{IdleTimeout: time.Second, OutageGrace: 10 * time.Second, EndMaxAge: 3 * time.Second}
	const s = time.Second
	for _, c := range []struct {
		name string
		p    partitionState
		want bool
	}{
		{"delivered recently", partitionState{Quiet: s / 2, EndKnown: true, CaughtUp: true, EndAge: 0}, false},
		{"at the timeout exactly", partitionState{Quiet: s, EndKnown: true, CaughtUp: true, EndAge: 0}, false},
		{"quiet, fresh end, caught up", partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: true, EndAge: s}, true},
		{"quiet, fresh end, backlog", partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: false, EndAge: s}, false},
		{"end exactly at the largest age", partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: true, EndAge: 3 * s}, true},
		// The broker is down: lookups fail, the last end offset ages.
		{"outage: stale end, caught up", partitionState{Quiet: 30 * s, EndKnown: true, CaughtUp: true, EndAge: 4 * s}, false},
		{"outage: long, whole source", partitionState{Quiet: 10 * time.Minute, EndKnown: true, CaughtUp: true, EndAge: 10 * time.Minute}, false},
		{"never looked up", partitionState{Quiet: 30 * s}, false},
		// Only this partition is unavailable while others answer.
		{"stranded within the grace", partitionState{Quiet: 30 * s, EndKnown: true, CaughtUp: true, EndAge: 30 * s, Stranded: 5 * s}, false},
		{"stranded at the grace exactly", partitionState{Quiet: 30 * s, EndKnown: true, CaughtUp: true, EndAge: 30 * s, Stranded: 10 * s}, false},
		{"stranded past the grace, caught up", partitionState{Quiet: 30 * s, EndKnown: true, CaughtUp: true, EndAge: 30 * s, Stranded: 11 * s}, true},
		{"stranded past the grace, known backlog", partitionState{Quiet: 30 * s, EndKnown: true, CaughtUp: false, EndAge: 30 * s, Stranded: 11 * s}, false},
		{"stranded past the grace, never looked up", partitionState{Quiet: 30 * s, Stranded: 11 * s}, true},
		{"stranded but delivering", partitionState{Quiet: s / 2, EndKnown: true, CaughtUp: true, EndAge: 30 * s, Stranded: time.Minute}, false},
	} {
		if got := partitionIdle(rule, c.p); got != c.want {
			t.Errorf("%s: partitionIdle(%+v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
	// A zero grace: a stranded partition is judged at once.
	zero := rule
	zero.OutageGrace = 0
	if !partitionIdle(zero, partitionState{Quiet: 2 * s, EndKnown: true, CaughtUp: true, EndAge: time.Minute, Stranded: time.Millisecond}) {
		t.Error("grace 0: a stranded, quiet, caught-up partition should be idle")
	}
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
