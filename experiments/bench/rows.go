package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Rows of the steady-state and large-state phases.
//
// A headline row runs its query as a user gets it: round-robin task
// placement and the source's default fetch sizes. Its figures are the
// verdicts of its targets. A tuned row (Tuned set) runs the same query with
// settings a user would have to choose (co-located tasks, 1 MB fetches): it
// is reported under its own label next to the headline row and never
// judged, so a tuned setting can never be what makes a target "met".
//
// A large-state row (WarmUp set) first builds its state with the warm-up
// config (a run with IsWarmUp that snapshots its stateful tasks), then
// loads that snapshot into the measured run, so the measured window starts
// on that state instead of replaying it.

// Row is one measured run of the steady-state or large-state phase.
type Row struct {
	Name   string `json:"name"`  // --rows name and the report's label
	Phase  string `json:"phase"` // PhaseSteady or PhaseLargeState
	Config string `json:"config"`
	// WarmUp is the config of the run that builds the state the measured
	// run loads (large-state rows); it must have the measured run's query,
	// parallelism, buckets and DummyFieldSize (checkWarmUpFits).
	WarmUp   string `json:"warm_up,omitempty"`
	Operator string `json:"operator"` // whose batch latency is reported
	CountAt  string `json:"count_at,omitempty"`
	// Unit names an event in the row's figures ("ev", "bids", …).
	Unit string `json:"unit"`
	Rate int    `json:"rate,omitempty"` // offered rate (0: the config's)
	// Tuned says what a tuned row changes from the defaults; empty for a
	// headline row.
	Tuned string `json:"tuned,omitempty"`
	// PerCore and Sustained are the row's targets (0: none), events per
	// worker CPU-second and events per second; the texts name them in the
	// targets table.
	PerCore         float64 `json:"per_core,omitempty"`
	PerCoreTarget   string  `json:"per_core_target,omitempty"`
	Sustained       float64 `json:"sustained,omitempty"`
	SustainedTarget string  `json:"sustained_target,omitempty"`
	// MinStateBytes > 0: the row's targets are judged only if its state
	// held that many bytes on disk at the window's start and the reads
	// went past the value cache (Steady.stateProof).
	MinStateBytes float64 `json:"min_state_bytes,omitempty"`
}

// Row names.
const (
	RowHello        = "hello"
	RowHelloTuned   = "hello-tuned"
	RowCounter      = "counter"
	RowCounterTuned = "counter-tuned"
	RowCounter10M   = "counter-10m"
	RowQ5           = "nexmark-q5"
	RowQ1One        = "q1-1src"
	RowQ1Two        = "q1-2src"
	RowQ6One        = "q6-1task"
	RowQ6Two        = "q6-2tasks"
)

// tunedFetchColocate and tunedFetch describe the tuned rows' settings.
const (
	tunedFetchColocate = "tuned: co-located, 1 MB fetches"
	tunedFetch         = "tuned: 1 MB fetches"
)

// BenchRows are the rows that have a config, in run order. The configs of
// the hello, counter and nexmark-q5 rows come from their flags (an empty
// --window-config leaves nexmark-q5 out); the others are the files beside
// them in experiments/bench.
func BenchRows(o Options) []Row {
	return slices.DeleteFunc(allRows(o), func(r Row) bool { return r.Config == "" })
}

// allRows is every row, with or without a config.
func allRows(o Options) []Row {
	dir := "experiments/bench/"
	return []Row{
		{Name: RowHello, Phase: PhaseSteady, Config: o.HelloConfig, Operator: "mapper", Unit: "ev", Rate: o.HelloRate,
			PerCore: TargetStatelessPerCore, PerCoreTarget: "q1 / stateless (hello) ≥ 500 K events/s per core"},
		{Name: RowHelloTuned, Phase: PhaseSteady, Config: dir + "hello-steady-tuned.json", Operator: "mapper", Unit: "ev", Rate: o.HelloRate, Tuned: tunedFetchColocate},
		{Name: RowCounter, Phase: PhaseSteady, Config: o.CounterConfig, Operator: "counter", Unit: "ev", Rate: o.CounterRate,
			PerCore: TargetKeyedPerCore, PerCoreTarget: "keyed counter on Pebble ≥ 150 K events/s per core"},
		{Name: RowCounterTuned, Phase: PhaseSteady, Config: dir + "counter-steady-tuned.json", Operator: "counter", Unit: "ev", Rate: o.CounterRate, Tuned: tunedFetch},
		{Name: RowCounter10M, Phase: PhaseSteady, Config: dir + "counter-10m-steady.json", Operator: "counter", Unit: "ev",
			PerCore: TargetKeyed10MPerCore, PerCoreTarget: "keyed counter over 10 M keys ≥ 150 K ev/s per worker-core"},
		// No per-core target for the windowed query: reported, not judged.
		{Name: RowQ5, Phase: PhaseSteady, Config: o.WindowConfig, Operator: "q5-window", CountAt: "q5-window", Unit: "ev", Rate: o.WindowRate},
		{Name: RowQ1One, Phase: PhaseSteady, Config: dir + "nexmark-q1-steady.json", Operator: "q1-currency", Unit: "bids",
			PerCore: TargetQ1PerCore, PerCoreTarget: "Nexmark q1, 1 source task: ≥ 410 K bids/s per worker-core (default placement)",
			Sustained: TargetQ1Sustained, SustainedTarget: "Nexmark q1, 1 source task: ≥ 360 K bids/s sustained"},
		{Name: RowQ1Two, Phase: PhaseSteady, Config: dir + "nexmark-q1-2src-steady.json", Operator: "q1-currency", Unit: "bids",
			PerCore: TargetQ1PerCore, PerCoreTarget: "Nexmark q1, 2 source tasks: ≥ 410 K bids/s per worker-core (default placement)",
			Sustained: TargetQ1Sustained, SustainedTarget: "Nexmark q1, 2 source tasks: ≥ 360 K bids/s sustained"},
		{Name: RowQ6One, Phase: PhaseLargeState, Config: dir + "q6mod-large-1task.json", WarmUp: dir + "q6mod-warmup-1task.json", Operator: "statefulMapper", Unit: "closed auctions",
			PerCore: TargetQ6PerCore, PerCoreTarget: "q6* (query6Mod), 1 stateful task, state ≥ 2 GB: ≥ 20 K closed auctions/s per worker-core",
			Sustained: TargetQ6Sustained, SustainedTarget: "q6* (query6Mod), 1 stateful task, state ≥ 2 GB: ≥ 27 K closed auctions/s sustained",
			MinStateBytes: TargetQ6StateBytes},
		{Name: RowQ6Two, Phase: PhaseLargeState, Config: dir + "q6mod-large-2tasks.json", WarmUp: dir + "q6mod-warmup-2tasks.json", Operator: "statefulMapper", Unit: "closed auctions",
			PerCore: TargetQ6PerCore, PerCoreTarget: "q6* (query6Mod), 2 stateful tasks, state ≥ 2 GB: ≥ 20 K closed auctions/s per worker-core",
			MinStateBytes: TargetQ6StateBytes},
	}
}

// RowNames are the names BenchRows knows.
func RowNames() []string {
	var out []string
	for _, r := range allRows(Options{}) {
		out = append(out, r.Name)
	}
	return out
}

// SelectableRows are the names --rows takes: RowNames and the autoscale
// phase's rows.
func SelectableRows() []string {
	out := RowNames()
	for _, r := range AutoscaleRows {
		out = append(out, r.Name)
	}
	return out
}

// ParseRows parses --rows: "all", or a comma-separated list of row names.
// Unknown or repeated names are errors naming the allowed values.
func ParseRows(s string) (map[string]bool, error) {
	known := SelectableRows()
	out := map[string]bool{}
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(strings.ToLower(n))
		switch {
		case n == "":
			continue
		case n == "all":
			for _, k := range known {
				out[k] = true
			}
		case !slices.Contains(known, n):
			return nil, fmt.Errorf("--rows: unknown row %q (allowed: all, %s)", n, strings.Join(known, ", "))
		case out[n]:
			return nil, fmt.Errorf("--rows: row %q named twice", n)
		default:
			out[n] = true
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--rows: empty (allowed: all, %s)", strings.Join(known, ", "))
	}
	return out, nil
}

// selectedRows are the rows of phase that rows selects, in run order.
func selectedRows(all []Row, phase string, rows map[string]bool) []Row {
	var out []Row
	for _, r := range all {
		if r.Phase == phase && rows[r.Name] {
			out = append(out, r)
		}
	}
	return out
}
