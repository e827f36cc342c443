package experiments_test

// The chaos soak of `koala soak` (experiments/soak), shortened to the CI's
// budget, on the shared stack.

import (
	"context"
	"testing"
	"time"

	"koala/experiments/soak"
)

// soakSeed is the CI soak's fixed seed; its plan (printed first in the
// log) has every reconfiguration and fault kind, a worker kill among
// them. A failure is reproduced by `koala soak --seed 9 --minutes 4
// --segment 80s --protocols lazy,stop-and-restart,lazy-fetch-on-demand`.
const soakSeed = 9

// TestSoak runs a 4-minute soak with a fixed seed: three segments (lazy,
// stop-and-restart, lazy fetch-on-demand) of a keyed counter, a windowed
// aggregate and a join under random reconfigurations and faults, and
// requires every output of every job to be exact.
func TestSoak(t *testing.T) {
	cfg := sharedStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	res, err := soak.Run(ctx, soak.Config{
		Stack: cfg, Seed: soakSeed, Duration: 4 * time.Minute, Segment: 80 * time.Second,
		Protocols:  []soak.Protocol{soak.LazyEventual, soak.StopAndRestart, soak.LazyFetchOnDemand},
		ResultsDir: t.TempDir(), KoalaBinary: koalaBinary(t), Out: logWriter{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := res.Counts()
	t.Logf("seed %d: %d reconfigurations done, %d rejected, %d failed; %d faults (%d failed); %d recoveries",
		soakSeed, n.ReconfDone, n.ReconfRejected, n.ReconfFailed, n.Faults, n.FaultsFailed, res.Recoveries)
	if !res.Exact() {
		t.Fatalf("not exact: %+v", res.Checks)
	}
	if n.ReconfDone < 8 || n.Faults < 6 {
		t.Errorf("%d reconfigurations done and %d faults, want at least 8 and 6 in 4 minutes", n.ReconfDone, n.Faults)
	}
	// A reconfiguration may fail (a worker kill cancels the one in flight,
	// and the job recovers without it); a fault must be injected and
	// recovered from.
	if n.FaultsFailed > 0 {
		t.Errorf("%d faults were not injected or not recovered from", n.FaultsFailed)
	}
}
