package bench

import (
	"sync/atomic"
	"testing"
	"time"
)

// The samplers take one sample at start, then one per tick, and the CPU
// sampler one more at stop so its window ends at the stop.
func TestPeriodicSamplesAtStartTicksAndStop(t *testing.T) {
	for _, atStop := range []bool{false, true} {
		var n atomic.Int64
		p := startPeriodic(5*time.Millisecond, atStop, func() { n.Add(1) })
		if n.Load() != 1 {
			t.Fatalf("takeAtStop=%v: %d samples right after start, want 1", atStop, n.Load())
		}
		deadline := time.Now().Add(10 * time.Second)
		for n.Load() < 3 {
			if time.Now().After(deadline) {
				t.Fatalf("takeAtStop=%v: only %d samples after 10 s of 5 ms ticks", atStop, n.Load())
			}
			time.Sleep(time.Millisecond)
		}
		before := n.Load()
		p.stop()
		after := n.Load()
		// A tick may land between the read and stop; at most one extra.
		extra := after - before
		if atStop && (extra < 1 || extra > 2) || !atStop && extra > 1 {
			t.Errorf("takeAtStop=%v: stop added %d samples", atStop, extra)
		}
		time.Sleep(20 * time.Millisecond)
		if n.Load() != after {
			t.Errorf("takeAtStop=%v: samples taken after stop", atStop)
		}
	}
}
