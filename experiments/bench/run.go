package bench

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
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
	// Rows selects rows of the steady, large-state and autoscale phases
	// ("all" or names of RowNames).
	Rows string
	// DialNATS connects to the stack's NATS (the workers' value-cache
	// counters); nil or an error leaves them unread, said in each row.
	DialNATS func() (*nats.Conn, error)

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
	// AutoscaleConfig is the autoscale phase's experiment (autoscale.go).
	AutoscaleConfig string
	// The disruption phase's rate probe: offered rates from ProbeFrom,
	// × ProbeFactor per step of ProbeStepSec, up to ProbeMax.
	ProbeFrom      int
	ProbeFactor    float64
	ProbeMax       int
	ProbeStepSec   int
	StatesvcAddr   string
	Gap, FlushWait time.Duration
	Margin         time.Duration

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
	if o.Rows == "" {
		o.Rows = "all"
	}
	rowSet, err := ParseRows(o.Rows)
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
	if phases[PhaseDisruption] {
		if _, err := runner.ProbeRates(o.ProbeFrom, o.ProbeFactor, o.ProbeMax); err != nil {
			return fmt.Errorf("--probe-from/--probe-factor/--probe-max: %w", err)
		}
		if o.ProbeStepSec < runner.ProbeSettleSec+2 {
			return fmt.Errorf("--probe-step-seconds %d: want at least %d (the first %d s of a step are skipped)", o.ProbeStepSec, runner.ProbeSettleSec+2, runner.ProbeSettleSec)
		}
	}
	rows := BenchRows(o)
	for _, r := range allRows(o) {
		if r.Config == "" && rowSet[r.Name] && o.Rows != "all" {
			return fmt.Errorf("--rows names %s, whose config flag is empty", r.Name)
		}
	}
	rep := BenchReport{Started: time.Now(), Machine: machineText(), Load: loadAvg(), Rows: o.Rows}
	for _, p := range BenchPhases {
		if phases[p] {
			rep.Phases = append(rep.Phases, p)
		}
	}
	stamp := rep.Started.Format("20060102-150405")
	rep.Notes = append(rep.Notes, fmt.Sprintf("stack run dir %s; the local stack (Temporal, NATS, Kafka, ClickHouse, controller, %d workers) shares the machine with the measured workers and with anything else running on it", o.RunDir, len(workerPIDs(o.RunDir))))
	rep.Notes = append(rep.Notes, "headline rows run as a user gets them: round-robin task placement and the source's default Kafka fetches (64 KiB or 25 ms); "+
		"tuned rows (hello-tuned: co-located tasks and 1 MiB / 100 ms fetches; counter-tuned: 1 MiB / 100 ms fetches) are shown beside them, labelled, and never judged")
	rep.Estimates = EstimatePhases(o, phases, rowSet)
	fmt.Printf("koala bench %s: run dir %s, results %s\n", stamp, o.RunDir, o.ResultsDir)
	fmt.Println("expected:", EstimateText(rep.Estimates))
	if o.Profile {
		if o.profiles, err = newBenchProfiles(o, stamp, phases[PhaseSteady] || phases[PhaseLargeState]); err != nil {
			return err
		}
	}

	var rawMicro string
	phaseStart := func(phase, name string) time.Time {
		rep.Notes = append(rep.Notes, fmt.Sprintf("load average at the start of %s: %s", name, loadAvg()))
		if est, ok := findEstimate(rep.Estimates, phase); ok {
			fmt.Printf("\n== %s: expected about %s (%s)\n", name, durationText(est.Sec), est.Basis)
		}
		return time.Now()
	}
	if phases[PhaseMicro] {
		t0 := phaseStart(PhaseMicro, "micro-benchmarks")
		rawMicro = benchMicro(ctx, o, &rep)
		rep.MicroSec = time.Since(t0).Seconds()
	}

	env := steadyEnv{o: o, ch: o.ClickHouse, stamp: stamp}
	if phases[PhaseSteady] || phases[PhaseDisruption] || phases[PhaseAutoscale] || phases[PhaseRSS] || phases[PhaseLargeState] {
		tc, err := o.DialTemporal(ctx)
		if err != nil {
			return err
		}
		defer tc.Close()
		env.tc = tc
	}
	if (phases[PhaseSteady] || phases[PhaseLargeState]) && o.DialNATS != nil {
		nc, err := o.DialNATS()
		if err != nil {
			rep.Notes = append(rep.Notes, "NATS not reached, so no value-cache counters: "+err.Error())
		} else {
			defer nc.Close()
			env.nats = nc
		}
	}

	if phases[PhaseSteady] && ctx.Err() == nil {
		t0 := phaseStart(PhaseSteady, "steady state")
		for i, row := range selectedRows(rows, PhaseSteady, rowSet) {
			if i > 0 {
				runner.Sleep(ctx, o.Gap)
			}
			if ctx.Err() != nil {
				break
			}
			rep.Steady = append(rep.Steady, benchSteady(ctx, env, row, ""))
		}
		rep.SteadySec = time.Since(t0).Seconds()
	}

	if phases[PhaseCeilings] && ctx.Err() == nil {
		t0 := phaseStart(PhaseCeilings, "ceilings")
		rep.Ceilings = benchCeilings(ctx, o, stamp)
		rep.CeilingsSec = time.Since(t0).Seconds()
	}

	if phases[PhaseDisruption] && ctx.Err() == nil {
		t0 := phaseStart(PhaseDisruption, "disruption")
		runner.Sleep(ctx, o.Gap)
		cmp, probe, dir, err := benchDisruption(ctx, env, &rep.Notes)
		if err != nil {
			rep.Notes = append(rep.Notes, "disruption: "+err.Error())
		}
		rep.Disruption, rep.Probe, rep.DisruptionDir = cmp, probe, dir
		rep.DisruptionSec = time.Since(t0).Seconds()
	}

	if phases[PhaseAutoscale] && ctx.Err() == nil {
		t0 := phaseStart(PhaseAutoscale, "autoscaling")
		runner.Sleep(ctx, o.Gap)
		rep.Autoscale = benchAutoscale(ctx, env, rowSet)
		rep.AutoscaleSec = time.Since(t0).Seconds()
	}

	if phases[PhaseState] && ctx.Err() == nil {
		t0 := phaseStart(PhaseState, "scaling with state")
		st := benchState(ctx, o)
		rep.State = &st
		rep.StateSec = time.Since(t0).Seconds()
	}

	if phases[PhaseRSS] && ctx.Err() == nil {
		t0 := phaseStart(PhaseRSS, "RSS under backpressure")
		runner.Sleep(ctx, o.Gap)
		r := benchRSS(ctx, o, env.tc, env.ch, stamp)
		rep.RSS = &r
		rep.RSSSec = time.Since(t0).Seconds()
	}

	if phases[PhaseLargeState] && ctx.Err() == nil {
		t0 := phaseStart(PhaseLargeState, "large state")
		runner.Sleep(ctx, o.Gap)
		rep.Steady = append(rep.Steady, benchLargeState(ctx, env, selectedRows(rows, PhaseLargeState, rowSet))...)
		rep.LargeStateSec = time.Since(t0).Seconds()
	}
	rep.Fractions = CeilingFractions(rep.Steady, rep.Ceilings)

	rep.Profiles = o.profiles.report()
	rep.Finished = time.Now()
	rep.LoadEnd = loadAvg()
	// Only a full run replaces the report and raw JSON a reader looks at
	// (BENCHMARKS.md, results/bench/bench.json): one row run alone would
	// otherwise leave a report of that row only. Every run also writes a
	// copy stamped with its start, report included, so runs stay comparable.
	var paths []string
	var werr error
	switch {
	case rep.Full():
		paths, werr = rep.WriteFiles(o.ResultsDir, cmp.Or(o.MDPath, DefaultReport), rawMicro)
	case o.MDPath != "":
		if werr = os.WriteFile(o.MDPath, []byte(rep.Markdown()), 0o644); werr == nil {
			paths = append(paths, o.MDPath)
		}
	}
	if werr == nil {
		stamped := filepath.Join(o.ResultsDir, "run-"+stamp)
		more, err := rep.WriteFiles(stamped, filepath.Join(stamped, DefaultReport), rawMicro)
		paths = append(paths, more...)
		werr = err
	}
	fmt.Println()
	fmt.Println("targets")
	for _, t := range rep.Targets() {
		fmt.Printf("  %-12s %s: %s\n", t.Verdict, t.Target, t.Measured)
	}
	fmt.Printf("\nbench took %.1f min (%s)\n", rep.Finished.Sub(rep.Started).Minutes(), rep.phaseTimesText())
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
	for _, a := range rep.Autoscale {
		if a.Lost != 0 || a.Duplicated != 0 {
			return fmt.Errorf("EXACTNESS VIOLATED in autoscale %s: lost=%d duplicated=%d", a.Row, a.Lost, a.Duplicated)
		}
	}
	for _, s := range rep.Steady {
		// A query that filters, joins or aggregates is not checked by the
		// ledger; the run says so and reports lost = duplicated = 0.
		if s.ExactnessUnchecked == "" && (s.Lost != 0 || s.Duplicated != 0) {
			return fmt.Errorf("EXACTNESS VIOLATED in %s %s: lost=%d duplicated=%d", s.Phase, s.label(), s.Lost, s.Duplicated)
		}
	}
	return ctx.Err()
}
