package bench

import (
	"fmt"
	"strings"
	"time"

	"koala/experiments"
	"koala/experiments/runner"
)

// Expected durations, printed before the phases run so a caller knows what
// a selection costs. They are estimates from the configs' runtimes plus
// what each run spends around them on this stack (deploying, draining,
// reading metrics), taken from earlier bench runs; the report prints the
// real times next to them.

// PhaseEstimate is one phase's expected duration.
type PhaseEstimate struct {
	Phase string  `json:"phase"`
	Sec   float64 `json:"sec"`
	Basis string  `json:"basis"`
}

// Per-run costs around the runtimes, from the bench run of 2026-12-02:
// three 40 s steady runs took 145 s and four 60 s disruption runs 278 s,
// gaps (5 s) and metric flushes (3 s) included.
const (
	runOverheadSec  = 2.0 // deploy, start, drain and stop a workflow run
	microSecPerSec  = 100.0
	stateSecPerGB   = 16.0 // the state phase's build, per GB of state
	stateSecPerSize = 4.0
	// warmUpKeysPerSec is what a large-state warm-up is assumed to build:
	// new q6* sellers (2 KB values) per second on this 2-core machine;
	// the report shows the real build time.
	warmUpKeysPerSec  = 15_000.0
	snapshotExtraSec  = 20.0 // snapshot (scanning and checkpointing the state) and load
	defaultRuntimeSec = 40
	// autoscaleOverheadSec: an autoscale run also drains its backlog and
	// waits for the autoscaler's result.
	autoscaleOverheadSec = 6.0
)

// EstimatePhases estimates each selected phase.
func EstimatePhases(o Options, phases map[string]bool, rows map[string]bool) []PhaseEstimate {
	var out []PhaseEstimate
	gap, flush := o.Gap.Seconds(), o.FlushWait.Seconds()
	// runtime is a measured run's: --steady-seconds or its config's.
	runtime := func(cfg string) int {
		if o.SteadySec > 0 {
			return o.SteadySec
		}
		return configRuntime(cfg)
	}
	all := BenchRows(o)
	for _, p := range BenchPhases {
		if !phases[p] {
			continue
		}
		e := PhaseEstimate{Phase: p}
		switch p {
		case PhaseMicro:
			bt, err := time.ParseDuration(o.Benchtime)
			if err != nil {
				bt = time.Second
			}
			e.Sec = microSecPerSec*bt.Seconds() + 2*float64(o.MicroRepeatCount)
			e.Basis = "go test -bench at -benchtime " + o.Benchtime
		case PhaseSteady:
			sel := selectedRows(all, PhaseSteady, rows)
			for _, r := range sel {
				e.Sec += float64(runtime(r.Config)) + runOverheadSec + flush + gap
			}
			e.Basis = fmt.Sprintf("%d rows: runtime + ~%.0f s each, more if a run falls behind and drains a backlog", len(sel), runOverheadSec+flush+gap)
		case PhaseCeilings:
			e.Sec = 3*o.CeilingDuration.Seconds() + 2
			e.Basis = fmt.Sprintf("3 × %s and the Kafka ceiling", o.CeilingDuration)
		case PhaseDisruption:
			rates, _ := runner.ProbeRates(o.ProbeFrom, o.ProbeFactor, o.ProbeMax)
			e.Sec = float64(len(rates)*o.ProbeStepSec) + runOverheadSec + flush + gap
			variants, _ := experiments.ParseVariants(o.Protocols)
			rt := configRuntime(o.DisruptionConfig) // --steady-seconds does not apply
			e.Sec += float64(len(variants)) * (float64(rt) + runOverheadSec + flush + gap)
			e.Basis = fmt.Sprintf("a %d-step rate probe, then %d protocols × %d s", len(rates), len(variants), rt)
		case PhaseAutoscale:
			n := 0
			for _, a := range AutoscaleRows {
				if rows[a.Name] {
					n++
				}
			}
			rt := AutoscaleStepSec + AutoscaleWindowSec + autoscaleTailSec
			e.Sec = gap + float64(n)*(float64(rt)+autoscaleOverheadSec+flush+gap)
			e.Basis = fmt.Sprintf("%d protocols × %d s (a 2× input step at %d s)", n, rt, AutoscaleStepSec)
		case PhaseState:
			sizes, _ := ParseByteSizes(o.StateSizes)
			for _, s := range sizes {
				e.Sec += stateSecPerGB*float64(s)/1e9 + stateSecPerSize
			}
			e.Basis = fmt.Sprintf("%d state sizes at ~%.0f s per GB", len(sizes), stateSecPerGB)
		case PhaseRSS:
			// Plus the backlog's drain after the window: a fifth of it.
			e.Sec = float64(o.RSSSec)*1.2 + runOverheadSec + flush + gap
			e.Basis = fmt.Sprintf("%d s offered, then its backlog drains", o.RSSSec)
		case PhaseLargeState:
			sel := selectedRows(all, PhaseLargeState, rows)
			var keys int64
			for _, r := range sel {
				if in, err := experiments.LoadConfig(r.WarmUp); err == nil {
					keys += in.Producer.MaxEvents
					e.Sec += float64(in.Producer.MaxEvents) / warmUpKeysPerSec
				}
				e.Sec += snapshotExtraSec + 2*(runOverheadSec+gap) + flush + float64(runtime(r.Config))
			}
			e.Basis = fmt.Sprintf("%d rows, each a warm-up (%d keys in all, assumed built at %.0f K/s) then a measured run", len(sel), keys, warmUpKeysPerSec/1000)
		}
		out = append(out, e)
	}
	return out
}

// configRuntime is cfg's TotalRuntimeSeconds (defaultRuntimeSec when it
// cannot be read: the run itself will say why).
func configRuntime(cfg string) int {
	if in, err := experiments.LoadConfig(cfg); err == nil && in.TotalRuntimeSeconds > 0 {
		return in.TotalRuntimeSeconds
	}
	return defaultRuntimeSec
}

// findEstimate is the estimate of phase.
func findEstimate(es []PhaseEstimate, phase string) (PhaseEstimate, bool) {
	for _, e := range es {
		if e.Phase == phase {
			return e, true
		}
	}
	return PhaseEstimate{}, false
}

// EstimateText lists the estimates and their total.
func EstimateText(es []PhaseEstimate) string {
	var parts []string
	total := 0.0
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%s ~%s", e.Phase, durationText(e.Sec)))
		total += e.Sec
	}
	return fmt.Sprintf("%s; total ~%s", strings.Join(parts, ", "), durationText(total))
}

// durationText prints seconds as seconds or minutes.
func durationText(sec float64) string {
	if sec < 120 {
		return fmt.Sprintf("%.0f s", sec)
	}
	return fmt.Sprintf("%.1f min", sec/60)
}
