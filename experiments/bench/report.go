package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"koala/experiments"
	"koala/experiments/runner"
)

// BenchReport is everything `koala bench` measured in one run.
type BenchReport struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  string    `json:"machine"`
	Load     string    `json:"load_before"`
	LoadEnd  string    `json:"load_after"`
	Notes    []string  `json:"notes,omitempty"`

	Micro        []MicroResult `json:"micro"`
	MicroCommand string        `json:"micro_command,omitempty"`
	MicroError   string        `json:"micro_error,omitempty"`
	MicroSec     float64       `json:"micro_sec"`

	Steady    []Steady `json:"steady"`
	SteadySec float64  `json:"steady_sec"`

	// LargeStateSec is the large-state phase's time; its rows are in
	// Steady (Phase PhaseLargeState).
	LargeStateSec float64 `json:"large_state_sec"`

	Disruption    *experiments.Comparison `json:"disruption,omitempty"`
	Probe         *runner.RateProbe       `json:"disruption_probe,omitempty"`
	DisruptionDir string                  `json:"disruption_dir,omitempty"`
	DisruptionSec float64                 `json:"disruption_sec"`

	Ceilings    []Ceiling         `json:"ceilings,omitempty"`
	Fractions   []CeilingFraction `json:"ceiling_fractions,omitempty"`
	CeilingsSec float64           `json:"ceilings_sec"`

	Autoscale    []AutoscaleRun `json:"autoscale,omitempty"`
	AutoscaleSec float64        `json:"autoscale_sec"`

	State    *StateScaling `json:"state,omitempty"`
	StateSec float64       `json:"state_sec"`

	RSS    *RSSRun `json:"rss,omitempty"`
	RSSSec float64 `json:"rss_sec"`

	Phases    []string        `json:"phases"` // the phases that were selected
	Rows      string          `json:"rows,omitempty"`
	Estimates []PhaseEstimate `json:"estimates,omitempty"` // expected phase durations, printed before they ran

	Profiles *BenchProfiles `json:"profiles,omitempty"` // --profile (profile.go)
}

// Verdict of one target.
const (
	VerdictMet      = "met"
	VerdictMissed   = "MISSED"
	VerdictUnknown  = "not measured"
	VerdictInformal = "stated"
)

// TargetRow is one line of the targets table.
type TargetRow struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Verdict  string `json:"verdict"`
	Source   string `json:"source"`
}

func verdict(ok bool) string {
	if ok {
		return VerdictMet
	}
	return VerdictMissed
}

// Row returns the disruption row of protocol p, if it completed.
func (r BenchReport) row(p string) (experiments.CompareRow, bool) {
	if r.Disruption == nil {
		return experiments.CompareRow{}, false
	}
	for _, row := range r.Disruption.Rows {
		if row.Protocol == p && row.Status == experiments.StatusOK {
			return row, true
		}
	}
	return experiments.CompareRow{}, false
}

// Targets evaluates the targets against the measurements.
func (r BenchReport) Targets() []TargetRow {
	var out []TargetRow
	add := func(t, m, v, src string) { out = append(out, TargetRow{t, m, v, src}) }

	out = append(out, r.rowTargets()...)

	lazy, okL := r.row(experiments.VariantLazy)
	sr, okS := r.row(experiments.VariantStopAndRestart)
	if okL && lazy.MinRatio != nil {
		add("lazy: min 1 s throughput ≥ 0.9 × pre-scale", fmt.Sprintf("%.2f (min %.0f / pre %.0f ev/s)", *lazy.MinRatio, deref(lazy.MinThroughput), deref(lazy.PreThroughput)),
			verdict(*lazy.MinRatio >= experiments.TargetMinRatio), "disruption lazy")
	} else {
		add("lazy: min 1 s throughput ≥ 0.9 × pre-scale", "n/a", VerdictUnknown, "disruption lazy")
	}
	switch {
	case okL && lazy.ReconfigBatch != nil && lazy.PreBatch != nil && lazy.PreBatch.P99Us > 0:
		f := float64(lazy.ReconfigBatch.P99Us) / float64(lazy.PreBatch.P99Us)
		add("lazy: p99 batch latency ≤ 3 × steady", fmt.Sprintf("%.2f × (HDR p99 of %d batches around the reconfiguration %.1f ms / of %d pre-scale batches %.1f ms)",
			f, lazy.ReconfigBatch.Count, float64(lazy.ReconfigBatch.P99Us)/1000, lazy.PreBatch.Count, float64(lazy.PreBatch.P99Us)/1000),
			verdict(f <= TargetPeakBatchFactor), "disruption lazy")
	case okL && lazy.PeakBatchUs != nil && lazy.PreBatchP99Us != nil && *lazy.PreBatchP99Us > 0:
		// No batch histograms (metric rows from before batch_time_hdr):
		// the per-second maxima are the closest figure.
		f := *lazy.PeakBatchUs / *lazy.PreBatchP99Us
		add("lazy: p99 batch latency ≤ 3 × steady", fmt.Sprintf("%.2f × (per-second max: peak %.1f ms / pre-scale p99 %.1f ms; no batch histograms)", f, *lazy.PeakBatchUs/1000, *lazy.PreBatchP99Us/1000),
			verdict(f <= TargetPeakBatchFactor), "disruption lazy")
	default:
		add("lazy: p99 batch latency ≤ 3 × steady", "n/a", VerdictUnknown, "disruption lazy")
	}
	lagTarget := "lazy: lag recovery ≥ 5 × faster than stop-and-restart"
	switch {
	case !okL || !okS:
		add(lagTarget, "n/a (a run is missing)", VerdictUnknown, "disruption")
	case lazy.LagRecoverySec == nil:
		add(lagTarget, "lazy: n/a ("+lazy.LagNote+")", VerdictUnknown, "disruption")
	case sr.LagRecoverySec == nil:
		add(lagTarget, fmt.Sprintf("lazy %.1f s; stop-and-restart n/a (%s)", *lazy.LagRecoverySec, sr.LagNote), VerdictUnknown, "disruption")
	case *sr.LagRecoverySec == 0:
		add(lagTarget, fmt.Sprintf("lazy %.1f s; stop-and-restart %.1f s (%s): no backlog to recover", *lazy.LagRecoverySec, *sr.LagRecoverySec, sr.LagNote), VerdictUnknown, "disruption")
	case *lazy.LagRecoverySec == 0:
		add(lagTarget, fmt.Sprintf("lazy 0 s (%s), stop-and-restart %.1f s", lazy.LagNote, *sr.LagRecoverySec), VerdictMet, "disruption")
	default:
		f := *sr.LagRecoverySec / *lazy.LagRecoverySec
		add(lagTarget, fmt.Sprintf("%.1f × (lazy %.1f s, stop-and-restart %.1f s)", f, *lazy.LagRecoverySec, *sr.LagRecoverySec),
			verdict(f >= TargetLagSpeedup), "disruption")
	}
	out = append(out, r.autoscaleTargets()...)
	if m, ok := FindMicro(r.Micro, "KLTLookup/hit/batch"); ok {
		// Both batches of present and of absent keys must make it: a
		// stateful task's batches hold both.
		ns := m.Metrics["ns/op"]
		if miss, ok := FindMicro(r.Micro, "KLTLookup/miss/batch"); ok {
			ns = max(ns, miss.Metrics["ns/op"])
		}
		add("KLT lookup ≤ 40 µs per 1000-key batch (1 M-key table; present and absent keys)", fmt.Sprintf("%.1f µs (hit%s); %s", m.Metrics["ns/op"]/1000, runsText(m), missText(r.Micro)), verdict(ns <= TargetKLTBatchNs), "go test statesvc")
	} else {
		add("KLT lookup ≤ 40 µs per 1000-key batch", "n/a", VerdictUnknown, "go test statesvc")
	}
	shareTarget := fmt.Sprintf("KLT lookup share of batch ≤ %.0f %%", TargetKLTBatchSharePct)
	if m, ok := kltShare(r.Micro); ok {
		pct := m.Metrics[KLTShareUnit]
		add(shareTarget, fmt.Sprintf("%.2f %% of a stateful batch's time (%.1f µs KLT lookup per batch, %s)", pct, m.Metrics[KLTShareNsUnit]/1000, m.Name),
			verdict(pct <= TargetKLTBatchSharePct), "go test dataplane")
	} else {
		add(shareTarget, "n/a", VerdictUnknown, "go test dataplane")
	}
	if m, ok := FindMicro(r.Micro, "KLTMemory"); ok {
		ex := m.Metrics["B/key-heap-excl-key"]
		add("KLT size per key ≤ 3.4 B (original, 40 M keys)", fmt.Sprintf("%.1f B/key on the heap excluding the 8-byte key (%.1f B/key with it, %.1f counted by Bytes(); Go map %.1f) at 1 M keys",
			ex, m.Metrics["B/key-heap"], m.Metrics["B/key-counted"], m.Metrics["B/key-gomap"]), verdict(ex <= TargetKLTBytesPerKey), "go test statesvc")
	} else {
		add("KLT size per key ≤ 3.4 B", "n/a", VerdictUnknown, "go test statesvc")
	}
	if r.State != nil {
		if sp, ok := r.State.Spread(); ok {
			add("bytes migrated proportional to active keys (within 20 % across state sizes)", fmt.Sprintf("spread %.1f %% over %d state sizes", 100*sp, len(r.State.Points)), r.State.Verdict(), "state (in-process)")
		} else {
			add("bytes migrated proportional to active keys (within 20 % across state sizes)", "n/a "+r.State.Error, VerdictUnknown, "state (in-process)")
		}
	} else if okL && okS {
		add("bytes migrated proportional to active keys (within 20 %)", fmt.Sprintf("lazy %s, stop-and-restart %s at one state size only", experiments.BytesText(lazy.BytesMigrated), experiments.BytesText(sr.BytesMigrated)),
			VerdictUnknown, "scaling with state not run")
	}
	if r.RSS != nil && r.RSS.Status == experiments.StatusOK {
		measured := r.RSS.summaryText() + "; " + r.RSS.lagText()
		if grew, why := r.RSS.LagGrowth(); !grew {
			measured += " — not measured: " + why
		}
		add(fmt.Sprintf("RSS flat under backpressure (growth over the last half ≤ %.0f %%)", 100*TargetRSSGrowth), measured, r.RSS.Verdict(), "rss")
	} else {
		add(fmt.Sprintf("RSS flat under backpressure (growth over the last half ≤ %.0f %%)", 100*TargetRSSGrowth), "n/a", VerdictUnknown, "rss")
	}
	return out
}

// kltShare is the KLT share benchmark's result, the largest share when it
// has sub-benchmarks; false when it did not run or reported no share.
func kltShare(rs []MicroResult) (MicroResult, bool) {
	var best MicroResult
	found := false
	for _, m := range rs {
		if m.Name != KLTShareBench && !strings.HasPrefix(m.Name, KLTShareBench+"/") {
			continue
		}
		if v, ok := m.Metrics[KLTShareUnit]; ok && (!found || v > best.Metrics[KLTShareUnit]) {
			best, found = m, true
		}
	}
	return best, found
}

func missText(rs []MicroResult) string {
	if m, ok := FindMicro(rs, "KLTLookup/miss/batch"); ok {
		return fmt.Sprintf("%.1f µs (miss%s)", m.Metrics["ns/op"]/1000, runsText(m))
	}
	return "miss n/a"
}

// runsText says, for a result CollapseMicro merged, that it is a median and
// over what range its runs spread.
func runsText(m MicroResult) string {
	n := m.Metrics["runs"]
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(", median of %.0f runs, %.1f–%.1f", n, m.Metrics["ns/op-min"]/1000, m.Metrics["ns/op-max"]/1000)
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// Markdown renders BENCHMARKS.md.
func (r BenchReport) Markdown() string {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("Written by `make bench` (`koala bench`). Every number below was measured in the run described here; nothing is copied from elsewhere. Raw JSON: `results/bench/`.\n\n")
	fmt.Fprintf(&b, "- run: %s → %s (%.1f min)\n", r.Started.UTC().Format(time.RFC3339), r.Finished.UTC().Format(time.RFC3339), r.Finished.Sub(r.Started).Minutes())
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- load average before / after: %s / %s\n", r.Load, r.LoadEnd)
	fmt.Fprintf(&b, "- phases: %s; %s\n", strings.Join(r.Phases, ","), r.phaseTimesText())
	if r.Rows != "" && r.Rows != "all" {
		fmt.Fprintf(&b, "- rows: %s (--rows)\n", r.Rows)
	}
	if len(r.Estimates) > 0 {
		fmt.Fprintf(&b, "- expected before the run: %s\n", EstimateText(r.Estimates))
	}
	for _, n := range r.Notes {
		b.WriteString("- " + n + "\n")
	}

	b.WriteString("\n## Targets (issues 8 and 19)\n\nA steady-state verdict is read from a headline row only (round-robin placement, default fetch sizes); each states how it was counted, the placement, the fetch sizes and the state next to its number. *Sustained* means the Kafka lag (produced minus processed, records read ahead included) grew by less than one second of the offered rate over the window.\n\n| target | measured | verdict | from |\n|---|---|---|---|\n")
	for _, t := range r.Targets() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", esc(t.Target), esc(t.Measured), t.Verdict, t.Source)
	}

	b.WriteString(r.steadyMarkdown(PhaseSteady))
	b.WriteString(r.ceilingsMarkdown())
	if r.State != nil {
		b.WriteString(r.State.markdown())
	}
	b.WriteString(r.rssMarkdown())
	b.WriteString(r.steadyMarkdown(PhaseLargeState))
	b.WriteString("\n\n## Disruption per protocol (2 → 4 scale-out of the keyed counter)\n\n")
	b.WriteString(r.probeMarkdown())
	if r.Disruption == nil {
		b.WriteString("Not run.\n")
	} else {
		fmt.Fprintf(&b, "Config `%s`, one run per protocol, one after another, at the rate above (full table, plots and per-run JSON in `%s`). Definitions as in `koala compare`.\n\n", r.Disruption.Config, r.DisruptionDir)
		md := r.Disruption.Markdown()
		// Reuse the comparison's own table and sections, without its title.
		if i := strings.Index(md, "\n| protocol"); i >= 0 {
			md = md[i+1:]
		}
		b.WriteString(strings.ReplaceAll(md, "\n## ", "\n### "))
	}

	b.WriteString(r.autoscaleMarkdown())

	b.WriteString("\n## Hot-path micro-benchmarks (go test -bench)\n\n")
	commandAndError(&b, r.MicroCommand, r.MicroError)
	b.WriteString("| package | benchmark | ns/op | other metrics |\n|---|---|---|---|\n")
	for _, m := range r.Micro {
		var extra []string
		for _, unit := range sortedUnits(m.Metrics) {
			if unit != "ns/op" {
				extra = append(extra, fmt.Sprintf("%s %s", trimFloat(m.Metrics[unit]), unit))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", m.Package, m.Name, trimFloat(m.Metrics["ns/op"]), strings.Join(extra, ", "))
	}
	b.WriteString("\nA benchmark with a *runs* metric ran that many times (the main run and the repeat run, `--micro-repeat`): its figures are the medians, with the range of ns/op in *ns/op-min* and *ns/op-max*.\n")
	b.WriteString("\nOne op of Frame*, BucketOf, OutputsBatching and Exchange (one frame sent over loopback gRPC and received) is a batch of 1000 records (~100 B each); of KLTLookup a batch of 1000 distinct keys in a 1 M-key table; of PebbleMultiGetPut one multi-get plus one multi-put of 1000 keys with 100-byte values.\n")
	b.WriteString(r.profilesMarkdown())
	return b.String()
}

// commandAndError writes a section's command line and error, each only when
// set.
func commandAndError(b *strings.Builder, command, err string) {
	if command != "" {
		fmt.Fprintf(b, "`%s`\n\n", command)
	}
	if err != "" {
		fmt.Fprintf(b, "Error: %s\n\n", esc(err))
	}
}

func esc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func trimFloat(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func sortedUnits(m map[string]float64) []string {
	order := []string{"ns/op", "ns/record", "ns/key", "MB/s", "B/record", "keys/s", "B/op", "allocs/op"}
	var out []string
	seen := map[string]bool{}
	for _, u := range order {
		if _, ok := m[u]; ok {
			out = append(out, u)
			seen[u] = true
		}
	}
	var rest []string
	for u := range m {
		if !seen[u] {
			rest = append(rest, u)
		}
	}
	sortStrings(rest)
	return append(out, rest...)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for k := i; k > 0 && s[k] < s[k-1]; k-- {
			s[k], s[k-1] = s[k-1], s[k]
		}
	}
}

// DefaultReport is the report a full run writes (koala bench --out).
const DefaultReport = "BENCHMARKS.md"

// Full says whether r ran every phase and every row, the only run whose
// report stands for the whole suite.
func (r BenchReport) Full() bool {
	return len(r.Phases) == len(BenchPhases) && (r.Rows == "" || r.Rows == "all")
}

// WriteFiles writes bench.json and micro.txt (when raw is not empty)
// into dir and the markdown report to mdPath. It returns the paths written.
func (r BenchReport) WriteFiles(dir, mdPath, rawMicro string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, "bench.json")
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	paths = append(paths, p)
	if rawMicro != "" {
		p = filepath.Join(dir, "micro.txt")
		if err := os.WriteFile(p, []byte(rawMicro), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	if mdPath != "" {
		if err := os.WriteFile(mdPath, []byte(r.Markdown()), 0o644); err != nil {
			return paths, err
		}
		paths = append(paths, mdPath)
	}
	return paths, nil
}
