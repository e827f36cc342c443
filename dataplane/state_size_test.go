package dataplane

import (
	"testing"
	"time"
)

// A task's state size is read from its store at most once a second,
// however often its status is asked for.
func TestStateSizeReadsAtMostOncePerSecond(t *testing.T) {
	var s stateSize
	reads := uint64(0)
	read := func() uint64 { reads++; return reads * 100 }
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		after time.Duration
		want  uint64
	}{{0, 100}, {500 * time.Millisecond, 100}, {999 * time.Millisecond, 100}, {time.Second, 200}, {1500 * time.Millisecond, 200}, {3 * time.Second, 300}} {
		if got := s.get(t0.Add(c.after), read); got != c.want {
			t.Errorf("at +%s: %d, want %d (%d reads)", c.after, got, c.want, reads)
		}
	}
}
