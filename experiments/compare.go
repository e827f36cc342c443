package experiments

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/experiments/hostcpu"
	"koala/workflows"
)

// Protocol variants compared by `koala compare`. "remote" is stop-and-restart
// over the remote-pebble state backend.
const (
	VariantLazy           = workflows.ProtocolLazy
	VariantStopAndRestart = workflows.ProtocolStopAndRestart
	VariantRemote         = "remote"
	VariantDRRS           = workflows.ProtocolDRRS
)

// CompareVariants are the known variants in their default order.
var CompareVariants = []string{VariantLazy, VariantStopAndRestart, VariantRemote, VariantDRRS}

// Constants of the comparison metrics.
const (
	CompareWarmupSec    = 3.0  // seconds of the job ignored as warm-up
	ResumeSlackSec      = 2.0  // seconds after a reconfiguration's end still searched for the throughput minimum
	LatencySlackSec     = 5.0  // seconds after a reconfiguration's end searched for the peak batch latency
	LagStaySec          = 2.0  // the lag must stay under its threshold this long to count as recovered
	LagFactor           = 1.2  // lag threshold: max(LagFactor × pre mean, pre mean + LagSlackRecords)
	LagSlackRecords     = 1000 //
	TargetMinRatio      = 0.9  // Koala's goal for min/pre throughput
	BatchLatencyPctl    = 99.0 // pre-scale percentile of the per-task per-second batch_time_max_us
	stallMissingSeconds = 2    // this many consecutive missing seconds count as a stall (zero throughput)
)

// ParseVariants splits a comma-separated list of variant names, rejecting
// unknown and repeated names. An empty list means CompareVariants.
func ParseVariants(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(CompareVariants, p) {
			return nil, fmt.Errorf("unknown protocol %q (known: %s)", p, strings.Join(CompareVariants, ", "))
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("protocol %q is listed twice", p)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return slices.Clone(CompareVariants), nil
	}
	return out, nil
}

// VariantInput returns a copy of base set up for one variant:
//
//   - "lazy": ReconfigProtocol "lazy", every other knob as configured;
//   - "stop-and-restart": ReconfigProtocol "stop-and-restart" with the
//     config's state backend;
//   - "remote": stop-and-restart over StateBackendType "remote-pebble";
//     remoteAddrs (comma-separated) overrides the config's RemotePebbleAddrs;
//     without any address the variant is skipped (skip says why);
//   - "drrs": ReconfigProtocol "drrs".
//
// base is not modified.
func VariantInput(base workflows.ExperimentInput, variant, remoteAddrs string) (in workflows.ExperimentInput, skip string, err error) {
	in = base
	in.Params = maps.Clone(base.Params)
	if in.Params == nil {
		in.Params = map[string]string{}
	}
	in.Parallelism = maps.Clone(base.Parallelism)
	in.Reconfigurations = slices.Clone(base.Reconfigurations)
	in.Workers = slices.Clone(base.Workers)
	in.ProducerWorkers = slices.Clone(base.ProducerWorkers)
	in.KafkaBrokers = slices.Clone(base.KafkaBrokers)
	switch variant {
	case VariantLazy:
		in.ReconfigProtocol = workflows.ProtocolLazy
	case VariantStopAndRestart:
		in.ReconfigProtocol = workflows.ProtocolStopAndRestart
	case VariantDRRS:
		in.ReconfigProtocol = workflows.ProtocolDRRS
	case VariantRemote:
		in.ReconfigProtocol = workflows.ProtocolStopAndRestart
		in.StateBackend = "remote-pebble"
		if a := strings.Join(splitComma(remoteAddrs), ","); a != "" {
			in.Params[control.ParamRemotePebbleAddrs] = a
		}
		if strings.Join(splitComma(in.Params[control.ParamRemotePebbleAddrs]), ",") == "" {
			return in, "no remote state server: set \"RemotePebbleAddrs\" in the config or pass --remote-pebble ADDR", nil
		}
	default:
		return in, "", fmt.Errorf("unknown protocol %q (known: %s)", variant, strings.Join(CompareVariants, ", "))
	}
	return in, "", nil
}

// NeedsStateServer says whether variants run the remote protocol with no
// state server to run it against: neither remoteAddrs nor the config's
// RemotePebbleAddrs names one.
func NeedsStateServer(base workflows.ExperimentInput, variants []string, remoteAddrs string) bool {
	if !slices.Contains(variants, VariantRemote) {
		return false
	}
	return len(splitComma(remoteAddrs)) == 0 && len(splitComma(base.Params[control.ParamRemotePebbleAddrs])) == 0
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// NotAvailable reports whether a failed run failed because its protocol (or
// a part it needs) is not implemented, and returns the reason to print.
func NotAvailable(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	msg := err.Error()
	low := strings.ToLower(msg)
	for _, s := range []string{"not implemented", "unimplemented", "not available"} {
		if strings.Contains(low, s) {
			return innermost(err), true
		}
	}
	return "", false
}

// innermost returns the message of the deepest wrapped error (Temporal wraps
// an activity's or child's failure several times).
func innermost(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// Status of a comparison row.
const (
	StatusOK           = "ok"
	StatusSkipped      = "skipped"
	StatusNotAvailable = "not available"
	StatusFailed       = "failed"
)

// CompareRow is one variant's run.
type CompareRow struct {
	Protocol string `json:"protocol"` // variant name
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`

	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	JobID      string `json:"job_id,omitempty"`
	UIURL      string `json:"ui_url,omitempty"`

	ReconfigProtocol string `json:"reconfig_protocol,omitempty"`
	StateBackend     string `json:"state_backend,omitempty"`

	Produced int64 `json:"produced"`
	// InputSec is how long the producers ran (the config's runtime).
	InputSec   float64 `json:"input_sec,omitempty"`
	Lost       int64   `json:"lost"`
	Duplicated int64   `json:"duplicated"`
	// Reordered counts records that reached the sink after a later record
	// of their key; OrderUnchecked says why the run could not check order.
	Reordered      int64  `json:"reordered"`
	OrderUnchecked string `json:"order_unchecked,omitempty"`

	RunMetrics
	// MetricsError is set when the ClickHouse reads failed.
	MetricsError string `json:"metrics_error,omitempty"`

	Reconfigs []ReconfigSummary `json:"reconfigs,omitempty"`
	// ControlPlaneMs is the summed duration of the reconfigurations.
	ControlPlaneMs float64 `json:"control_plane_ms"`
	// StateMove sums the keyed state the reconfigurations moved, as their
	// workflows measured it; nil when none moved any (stateless operator,
	// remote state, fetch-on-demand scale-out).
	StateMove *StateMoveTotal `json:"state_move,omitempty"`
	// ReconfigSpan is the reconfiguration interval on the metric axis.
	ReconfigSpan []Interval `json:"reconfig_span,omitempty"`

	// HostSamples is this machine's CPU over the run (hostcpu), kept so a
	// report rebuilt from ClickHouse later has it too; nil: not sampled.
	HostSamples *hostcpu.Record `json:"host_cpu_samples,omitempty"`
	// Profiles are the workers' CPU profiles around the first trigger
	// (koala compare --profile; compare_profile.go).
	Profiles []WorkerProfile `json:"profiles,omitempty"`

	// Series aligned on the first reconfiguration's start (= 0 s).
	SinkAligned []metrics.Point `json:"sink_throughput_aligned,omitempty"`
	LagAligned  []metrics.Point `json:"kafka_lag_aligned,omitempty"`
}

// StateMoveTotal sums the state moves (workflows.StateMove) of a run.
type StateMoveTotal struct {
	Moves int    `json:"moves"`
	Bytes uint64 `json:"bytes"`
	// Millis sums the moves' durations. Bulk moves (stop-and-restart,
	// DRRS): each from its eager handoff's first request to its last new
	// owner's "migrated" event — DRRS subscales run one after another, so
	// the sum is the time spent moving. Lazy: the await-migration steps'
	// own time (values moved while records flowed).
	Millis float64 `json:"millis"`
	// Bulk: every move was a bulk one; only then is MBPerSec, Bytes/10^6
	// over Millis/1000, set.
	Bulk     bool     `json:"bulk"`
	MBPerSec *float64 `json:"mb_per_s,omitempty"`
}

// SumStateMoves totals the moves of rcs; nil without any. It is pure.
func SumStateMoves(rcs []ReconfigSummary) *StateMoveTotal {
	var t StateMoveTotal
	t.Bulk = true
	for _, rc := range rcs {
		for _, m := range rc.Moves {
			t.Moves++
			t.Bytes += m.Bytes
			t.Millis += m.Millis
			t.Bulk = t.Bulk && m.Bulk
		}
	}
	if t.Moves == 0 {
		return nil
	}
	if t.Bulk && t.Millis > 0 {
		t.MBPerSec = ptr(float64(t.Bytes) / 1e6 / (t.Millis / 1000))
	}
	return &t
}

// ExactnessViolated reports whether a completed run lost, duplicated or
// reordered records.
func (r CompareRow) ExactnessViolated() bool {
	return r.Status == StatusOK && (r.Lost != 0 || r.Duplicated != 0 || r.Reordered != 0)
}

// Comparison is the outcome of `koala compare`.
type Comparison struct {
	Experiment string    `json:"experiment"`
	Config     string    `json:"config"`
	Started    time.Time `json:"started"`
	// Load is set when the rate was probed (--overload).
	Load *OfferedLoad `json:"load,omitempty"`
	// Snapshot is set when the runs load a warm-up snapshot: its files
	// were read into the page cache before the first run.
	Snapshot *SnapshotRead `json:"snapshot,omitempty"`
	Rows     []CompareRow  `json:"rows"`
	// ProfileCategories name the shares of the rows' profiles
	// (cpuprof.Names of the categories they were split by).
	ProfileCategories []string `json:"profile_categories,omitempty"`
}

// SnapshotRead is how `koala compare` read a warm-up snapshot's files
// into the page cache before its first run.
type SnapshotRead struct {
	Dir     string  `json:"dir"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// Skipped says why nothing was read (the files would not fit).
	Skipped string `json:"skipped,omitempty"`
	// Stores is the snapshot's stateful task stores, Compacted how many of
	// them were compacted whole when it was taken (control.TaskSnapshot).
	Stores    int `json:"stores,omitempty"`
	Compacted int `json:"compacted,omitempty"`
}

func (s SnapshotRead) Text() string {
	if s.Skipped != "" {
		return fmt.Sprintf("The warm-up snapshot `%s` was not read into the page cache before the first run: %s.", filepath.Base(s.Dir), s.Skipped) + s.compactionText()
	}
	return fmt.Sprintf("Before the first run the warm-up snapshot `%s` (%s) was read into the page cache, in %.1f s, so every run starts from it there.", filepath.Base(s.Dir), BytesText(float64(s.Bytes)), s.Seconds) + s.compactionText()
}

// compactionText says whether the snapshot's stores were compacted whole
// when it was taken: one that was not makes the first compactions of every
// run rewrite the warm-up's values once (statesvc.Pebble.CompactAll).
func (s SnapshotRead) compactionText() string {
	switch {
	case s.Stores == 0:
		return ""
	case s.Compacted == s.Stores:
		return " Its stores were compacted whole, values rewritten in key order, when it was taken."
	default:
		return fmt.Sprintf(" %d of its %d stores were not compacted whole when it was taken (a snapshot built before snapshots were compacted, or one whose compaction ran out of time), so the first compactions of each run rewrite the warm-up's values once; remove the snapshot to rebuild it.", s.Stores-s.Compacted, s.Stores)
	}
}

// Violations lists "protocol: lost=N duplicated=M reordered=R" for every
// completed run whose exactness failed.
func (c Comparison) Violations() []string {
	var out []string
	for _, r := range c.Rows {
		if r.ExactnessViolated() {
			out = append(out, fmt.Sprintf("%s: lost=%d duplicated=%d reordered=%d", r.Protocol, r.Lost, r.Duplicated, r.Reordered))
		}
	}
	return out
}

// BuildRow fills a completed run's row from its workflow result and the
// series read from ClickHouse (sr; its Reconfigs and InputEnd are derived
// here from res when zero, using jobStart to place them on the metric axis).
// It is pure.
func BuildRow(row CompareRow, res workflows.ExperimentResult, totalSec int, jobStart time.Time, sr RunSeries) CompareRow {
	row.Status = StatusOK
	row.JobID = res.JobID
	row.Produced, row.Lost, row.Duplicated = res.Produced, res.Lost, res.Duplicated
	row.Reordered, row.OrderUnchecked = res.Reordered, res.OrderUnchecked
	row.InputSec = float64(totalSec)
	offset := 0.0
	if !res.StartedAt.IsZero() && !jobStart.IsZero() {
		offset = res.StartedAt.Sub(jobStart).Seconds()
	}
	if sr.Reconfigs == nil {
		for _, rc := range res.Reconfigs {
			sr.Reconfigs = append(sr.Reconfigs, Interval{Start: rc.StartSec + offset, End: rc.EndSec + offset})
		}
	}
	if sr.InputEnd == 0 && totalSec > 0 {
		sr.InputEnd = float64(totalSec) + offset
	}
	row.ReconfigSpan = sr.Reconfigs
	row.Reconfigs = nil
	row.ControlPlaneMs = 0
	for _, rc := range res.Reconfigs {
		rs := ReconfigSummary{ID: rc.ID, Protocol: rc.Protocol, Millis: (rc.EndSec - rc.StartSec) * 1000, Moves: rc.Moves}
		for _, st := range rc.Steps {
			rs.Steps = append(rs.Steps, StepSummary{Step: st.Step, Millis: st.Millis})
		}
		row.Reconfigs = append(row.Reconfigs, rs)
		row.ControlPlaneMs += rs.Millis
	}
	row.StateMove = SumStateMoves(row.Reconfigs)
	row.RunMetrics = ComputeRunMetrics(sr)
	if len(sr.Reconfigs) > 0 {
		zero := sr.Reconfigs[0].Start
		row.SinkAligned = Shift(sr.Sink, zero)
		row.LagAligned = Shift(sr.Lag, zero)
	}
	return row
}
