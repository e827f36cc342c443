package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"koala/dataplane/metrics"
	"koala/experiments/runner"
)

// Options are the settings of one bench run; cmd/koala fills them from its
// flags (the flag names appear in the errors). The clients come in from the
// caller: Temporal is dialled only when a phase that starts workflows runs.
type Options struct {
	DialTemporal   func(context.Context) (client.Client, error)
	ClickHouse     *metrics.ClickHouse // nil: the steady phase cannot read its figures
	Namespace      string
	UIURL          string   // Temporal web UI base URL, for links
	Kafka          []string // the stack's brokers, for configs that name none
	GoCommand      string   // the go toolchain (micro phase), looked up on PATH
	StatesvcBinary string   // the koala binary whose statesvc serves the remote protocol (empty: this executable)

	RunDir     string // the stack's run directory (worker PID files)
	ResultsDir string
	MDPath     string

	MicroPackages    []string
	MicroRegex       string
	Benchtime        string
	MicroRepeat      string
	MicroRepeatCount int

	HelloConfig, CounterConfig, WindowConfig string
	HelloRate, CounterRate, WindowRate       int
	SteadySec                                int

	CeilingDuration time.Duration
	KafkaRecords    int
	PebbleKeys      int

	RSSConfig   string
	RSSRate     int
	RSSSec      int
	RSSInterval time.Duration

	StateSizes      string
	StateValueBytes int
	StateActiveKeys int

	DisruptionConfig string
	Protocols        string
	StatesvcAddr     string
	Gap, FlushWait   time.Duration
	Margin           time.Duration

	Phases     string
	Profile    bool
	ProfileSec int

	profiles *benchProfiles // set by Run with Profile
}

// Run runs the selected phases in order, writes the report and the raw
// JSON, prints the targets, and fails on an exactness violation.
func Run(ctx context.Context, o Options) error {
	phases, err := ParsePhases(o.Phases)
	if err != nil {
		return err
	}
	if o.MicroRepeatCount < 0 || o.MicroRepeatCount > 20 {
		return fmt.Errorf("--micro-repeat-count %d: want 0 to 20", o.MicroRepeatCount)
	}
	if phases[PhaseState] {
		// Bad state flags fail now, not after the phases before it ran.
		if _, err := stateSpec(o); err != nil {
			return err
		}
	}
	rep := BenchReport{Started: time.Now(), Machine: machineText(), Load: loadAvg()}
	for _, p := range BenchPhases {
		if phases[p] {
			rep.Phases = append(rep.Phases, p)
		}
	}
	stamp := rep.Started.Format("20060102-150405")
	rep.Notes = append(rep.Notes, fmt.Sprintf("stack run dir %s; the local stack (Temporal, NATS, Kafka, ClickHouse, controller, %d workers) shares the machine with the measured workers and with anything else running on it", o.RunDir, len(workerPIDs(o.RunDir))))
	rep.Notes = append(rep.Notes, "steady-state rates (configs experiments/bench/hello-steady.json, counter-steady.json) were re-probed on 2026-11-29 after the data-plane throughput work, on this 2-core machine while other work kept it busy (load average 12-18): "+
		"hello at 120 K ev/s offered (two producers) reached 96-97 % at the sink, counter at 30 K offered 95-98 %, both with lag not growing; before that work hello was producer-bound at ~67 K ev/s with two producers and counter's sink saturated at ~19 K ev/s. "+
		"Since then the steady runs place the producers on a worker that hosts no task (ProducerWorkers, the stack's last worker) and count only the task workers as pipeline CPU, the producer worker's CPU reported apart (before, the producers ran inside the task workers and their CPU was part of the worker CPU-s), and hello-steady.json co-locates its source, mapper and sink on one worker (TaskPlacement), so its records do not cross the gRPC exchange, and asks the broker for fetches of 1 MB (at most 100 ms wait; SourceFetchMinBytes/SourceFetchMaxWaitMs) instead of 64 KB / 25 ms, which about halves the Kafka consume cost per event at the price of up to ~80 ms more e2e latency at 120 K ev/s. "+
		"counter-steady.json asks for the same fetches (its tasks stay round robin: co-locating them measured no CPU gain); at 30 K ev/s this took the counter from 155-175 K to 215-221 K ev/s per CPU-s and raised its e2e p50 from 20-50 ms to ~72 ms (a 50 ms wait: 183 K at p50 38 ms)")
	fmt.Printf("koala bench %s: run dir %s, results %s\n", stamp, o.RunDir, o.ResultsDir)
	if o.Profile {
		if o.profiles, err = newBenchProfiles(o, stamp, phases[PhaseSteady]); err != nil {
			return err
		}
	}

	var rawMicro string
	phaseLoad := func(phase string) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("load average at the start of %s: %s", phase, loadAvg()))
	}
	if phases[PhaseMicro] {
		phaseLoad("micro-benchmarks")
		t0 := time.Now()
		rawMicro = benchMicro(ctx, o, &rep)
		rep.MicroSec = time.Since(t0).Seconds()
	}

	var tc client.Client
	if phases[PhaseSteady] || phases[PhaseDisruption] || phases[PhaseRSS] {
		tc, err = o.DialTemporal(ctx)
		if err != nil {
			return err
		}
		defer tc.Close()
	}
	ch := o.ClickHouse

	if phases[PhaseSteady] && ctx.Err() == nil {
		phaseLoad("steady state")
		t0 := time.Now()
		for i, c := range []struct {
			query, cfg, op, countAt string
			rate                    int
			target                  float64
		}{
			{"hello", o.HelloConfig, "mapper", "", o.HelloRate, TargetStatelessPerCore},
			{"counter", o.CounterConfig, "counter", "", o.CounterRate, TargetKeyedPerCore},
			// No per-core target for the windowed query: reported, not judged.
			{"nexmark-q5", o.WindowConfig, "q5-window", "q5-window", o.WindowRate, 0},
		} {
			if c.cfg == "" {
				continue
			}
			if i > 0 {
				runner.Sleep(ctx, o.Gap)
			}
			if ctx.Err() != nil {
				break
			}
			s := benchSteady(ctx, o, tc, ch, c.cfg, c.op, c.countAt, c.rate, c.target, stamp)
			rep.Steady = append(rep.Steady, s)
		}
		rep.SteadySec = time.Since(t0).Seconds()
	}

	if phases[PhaseCeilings] && ctx.Err() == nil {
		phaseLoad("ceilings")
		t0 := time.Now()
		rep.Ceilings = benchCeilings(ctx, o, stamp)
		rep.CeilingsSec = time.Since(t0).Seconds()
	}
	rep.Fractions = CeilingFractions(rep.Steady, rep.Ceilings)

	if phases[PhaseDisruption] && ctx.Err() == nil {
		phaseLoad("disruption")
		t0 := time.Now()
		runner.Sleep(ctx, o.Gap)
		cmp, dir, err := benchDisruption(ctx, o, tc, ch, stamp, &rep.Notes)
		if err != nil {
			rep.Notes = append(rep.Notes, "disruption: "+err.Error())
		}
		rep.Disruption, rep.DisruptionDir = cmp, dir
		rep.DisruptionSec = time.Since(t0).Seconds()
	}

	if phases[PhaseState] && ctx.Err() == nil {
		phaseLoad("scaling with state")
		t0 := time.Now()
		st := benchState(ctx, o)
		rep.State = &st
		rep.StateSec = time.Since(t0).Seconds()
	}

	if phases[PhaseRSS] && ctx.Err() == nil {
		phaseLoad("RSS under backpressure")
		t0 := time.Now()
		runner.Sleep(ctx, o.Gap)
		r := benchRSS(ctx, o, tc, ch, stamp)
		rep.RSS = &r
		rep.RSSSec = time.Since(t0).Seconds()
	}

	rep.Profiles = o.profiles.report()
	rep.Finished = time.Now()
	rep.LoadEnd = loadAvg()
	paths, werr := rep.WriteFiles(o.ResultsDir, o.MDPath, rawMicro)
	// A copy stamped with the run, so earlier runs stay comparable.
	if werr == nil {
		if more, err := rep.WriteFiles(filepath.Join(o.ResultsDir, "run-"+stamp), "", rawMicro); err == nil {
			paths = append(paths, more...)
		}
	}
	fmt.Println()
	fmt.Println("targets")
	for _, t := range rep.Targets() {
		fmt.Printf("  %-8s %s: %s\n", t.Verdict, t.Target, t.Measured)
	}
	fmt.Printf("\nbench took %.1f min (micro %.0f s, steady %.0f s, ceilings %.0f s, disruption %.0f s, state %.0f s, rss %.0f s)\n",
		rep.Finished.Sub(rep.Started).Minutes(), rep.MicroSec, rep.SteadySec, rep.CeilingsSec, rep.DisruptionSec, rep.StateSec, rep.RSSSec)
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	if werr != nil {
		return werr
	}
	if rep.Disruption != nil {
		if v := rep.Disruption.Violations(); len(v) > 0 {
			return fmt.Errorf("EXACTNESS VIOLATED: %s", strings.Join(v, "; "))
		}
	}
	for _, s := range rep.Steady {
		// A query that filters, joins or aggregates is not checked by the
		// ledger; the run says so and reports lost = duplicated = 0.
		if s.ExactnessUnchecked == "" && (s.Lost != 0 || s.Duplicated != 0) {
			return fmt.Errorf("EXACTNESS VIOLATED in steady %s: lost=%d duplicated=%d", s.Query, s.Lost, s.Duplicated)
		}
	}
	return ctx.Err()
}
