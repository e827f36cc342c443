package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

// benchDefaults are koala bench's flag defaults (paths from the
// repository's root).
func benchDefaults() Options {
	return Options{HelloConfig: "experiments/bench/hello-steady.json", CounterConfig: "experiments/bench/counter-steady.json", WindowConfig: "experiments/bench/nexmark-q5-steady.json",
		DisruptionConfig: "experiments/bench/counter-lazy-2to4.json", Protocols: "lazy,stop-and-restart,remote,drrs", Benchtime: "1s", MicroRepeatCount: 4,
		Gap: 5 * time.Second, FlushWait: 3 * time.Second, CeilingDuration: 5 * time.Second, RSSSec: 90, StateSizes: "0.5GB,1GB,2GB,4GB",
		ProbeFrom: 10_000, ProbeFactor: 1.3, ProbeMax: 160_000, ProbeStepSec: 6}
}

func TestEstimatePhases(t *testing.T) {
	t.Chdir("../..") // where make bench runs, as the row configs' paths expect
	o := benchDefaults()
	all, _ := ParsePhases("all")
	rows, _ := ParseRows("all")
	es := EstimatePhases(o, all, rows)
	if len(es) != len(BenchPhases) {
		t.Fatalf("%d estimates for %d phases", len(es), len(BenchPhases))
	}
	sec := map[string]float64{}
	total := 0.0
	for _, e := range es {
		sec[e.Phase] = e.Sec
		total += e.Sec
	}
	// Six 40 s and two 30 s steady rows at 10 s each around them; 11 probe
	// steps of 6 s and four 60 s protocol runs; warm-ups of 1.2 M and 2.2 M
	// sellers (state beyond 4 × one and two tasks' value caches).
	largeRun := snapshotExtraSec + 2*(runOverheadSec+5) + 3 + 40 // a large-state row besides its warm-up
	for phase, want := range map[string]float64{
		PhaseSteady:     6*(40+10) + 2*(30+10),
		PhaseDisruption: 11*6 + 10 + 4*(60+10),
		PhaseLargeState: (1.2e6+2.2e6)/warmUpKeysPerSec + 2*largeRun,
	} {
		if math.Abs(sec[phase]-want) > 1e-6 {
			t.Errorf("%s: %.1f s, want %.1f", phase, sec[phase], want)
		}
	}
	// The whole default bench stays near 28 minutes (25 before the
	// autoscale phase's two 89 s runs).
	if total > 29*60 {
		t.Errorf("default bench expected to take %.1f min", total/60)
	}
	// A selection costs only what it runs.
	one, _ := ParseRows("q6-1task")
	large, _ := ParsePhases("large-state")
	es = EstimatePhases(o, large, one)
	if len(es) != 1 || math.Abs(es[0].Sec-(1.2e6/warmUpKeysPerSec+largeRun)) > 1e-6 || !strings.Contains(es[0].Basis, "1 rows") {
		t.Errorf("one large-state row: %+v", es)
	}
	if got := EstimateText(es); !strings.HasPrefix(got, "large-state ~2.") {
		t.Errorf("EstimateText = %q", got)
	}
}
