package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"koala/dataplane/metrics"
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

// ParamRemotePebbleAddrs is the config knob (kept in Params) naming the state
// servers of the remote-pebble backend.
const ParamRemotePebbleAddrs = "RemotePebbleAddrs"

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
			in.Params[ParamRemotePebbleAddrs] = a
		}
		if strings.Join(splitComma(in.Params[ParamRemotePebbleAddrs]), ",") == "" {
			return in, "no remote state server: set \"RemotePebbleAddrs\" in the config or pass --remote-pebble ADDR", nil
		}
	default:
		return in, "", fmt.Errorf("unknown protocol %q (known: %s)", variant, strings.Join(CompareVariants, ", "))
	}
	return in, "", nil
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

// ---------------------------------------------------------------- metrics

// Interval is a reconfiguration's [Start, End] in seconds on a run's metric
// axis (seconds since the job's first metric row).
type Interval struct {
	Start float64 `json:"start_sec"`
	End   float64 `json:"end_sec"`
}

// RunSeries is what the comparison reads of one run; all points are on the
// job's metric axis and per second (a point at Sec s covers [s, s+1)).
type RunSeries struct {
	Sink           []metrics.Point            // sink records_in per second
	Lag            []metrics.Point            // per-second sum of kafka_lag of the source tasks
	BatchMaxByTask map[string][]metrics.Point // batch_time_max_us per task of the target operator(s)
	Bytes          []metrics.Point            // per-second sum of bytes_transferred of the target operator(s)
	Reconfigs      []Interval                 // the run's reconfigurations, on the metric axis
	// InputEnd is when the producer stopped (metric axis); later seconds
	// are the drain and are ignored by the lag and pre-scale windows.
	// 0 means unknown (the whole series is used).
	InputEnd float64
}

// RunMetrics are the comparison figures of one run. A nil field is "n/a".
type RunMetrics struct {
	// PreThroughput is the mean sink events/s over the seconds before the
	// first reconfiguration, after the warm-up; PreMinThroughput is the
	// smallest of those seconds (the noise floor of MinThroughput).
	PreThroughput    *float64 `json:"pre_throughput_eps"`
	PreMinThroughput *float64 `json:"pre_min_throughput_eps"`
	// MinThroughput is the minimum 1 s sink throughput from the first
	// reconfiguration's start to the last one's end + ResumeSlackSec.
	MinThroughput *float64 `json:"min_throughput_eps"`
	MinRatio      *float64 `json:"min_ratio"`

	PreLagMean   *float64 `json:"pre_lag_mean"`
	LagThreshold *float64 `json:"lag_threshold"`
	PeakLag      *float64 `json:"peak_lag"` // from the first reconfiguration's start to the end of input
	// LagRecoverySec is the time from the first reconfiguration's start
	// until the source lag is back under LagThreshold for LagStaySec.
	LagRecoverySec *float64 `json:"lag_recovery_sec"`
	LagNote        string   `json:"lag_note,omitempty"`

	// PeakBatchUs is the largest batch_time_max_us of the target operator's
	// tasks from the first reconfiguration's start to the last one's end +
	// LatencySlackSec; PreBatchP99Us the pre-scale p99 of the same samples.
	PeakBatchUs   *float64 `json:"peak_batch_us"`
	PreBatchP99Us *float64 `json:"pre_batch_p99_us"`

	BytesMigrated float64 `json:"bytes_migrated"`
}

// ComputeRunMetrics derives the comparison figures of one run. It is pure.
// Without reconfigurations only the pre-scale figures (over the whole run
// after warm-up) and the bytes are computed.
func ComputeRunMetrics(s RunSeries) RunMetrics {
	var m RunMetrics
	sink, lag := cleanPoints(s.Sink), cleanPoints(s.Lag)
	horizon := math.Inf(1)
	if s.InputEnd > 0 {
		horizon = s.InputEnd
	}
	m.BytesMigrated = SumValues(s.Bytes)

	rcs := make([]Interval, 0, len(s.Reconfigs))
	for _, r := range s.Reconfigs {
		if isFinite(r.Start) && isFinite(r.End) {
			rcs = append(rcs, Interval{Start: r.Start, End: max(r.End, r.Start)})
		}
	}
	preEnd := horizon
	if len(rcs) > 0 {
		preEnd = rcs[0].Start
	}
	if mean, lo, n := WindowMean(sink, CompareWarmupSec, preEnd); n > 0 {
		m.PreThroughput, m.PreMinThroughput = ptr(mean), ptr(lo)
	}
	if mean, _, n := WindowMean(lag, CompareWarmupSec, preEnd); n > 0 {
		m.PreLagMean = ptr(mean)
		m.LagThreshold = ptr(LagThreshold(mean))
	}
	var preBatch []float64
	for _, pts := range s.BatchMaxByTask {
		for _, p := range cleanPoints(pts) {
			if p.Sec >= CompareWarmupSec && p.Sec+1 <= preEnd && p.Value > 0 {
				preBatch = append(preBatch, p.Value)
			}
		}
	}
	if v, ok := Percentile(preBatch, BatchLatencyPctl); ok {
		m.PreBatchP99Us = ptr(v)
	}
	if len(rcs) == 0 {
		m.LagNote = "no reconfiguration"
		return m
	}
	start := rcs[0].Start
	end := rcs[0].End
	for _, r := range rcs {
		start, end = min(start, r.Start), max(end, r.End)
	}
	if v, ok := WindowMin(sink, start, min(end+ResumeSlackSec, horizon)); ok {
		m.MinThroughput = ptr(v)
		if m.PreThroughput != nil && *m.PreThroughput > 0 {
			m.MinRatio = ptr(v / *m.PreThroughput)
		}
	}
	if v, ok := WindowMax(lag, start, horizon); ok {
		m.PeakLag = ptr(v)
	}
	switch {
	case m.LagThreshold == nil:
		m.LagNote = "no lag data before the reconfiguration"
	default:
		sec, note := LagRecovery(lag, start, *m.LagThreshold, horizon)
		switch {
		case note == LagNeverRecovered || note == LagNoData:
			m.LagNote = note
		case note == LagNoRise && m.MinThroughput != nil && *m.MinThroughput == 0 &&
			m.PreThroughput != nil && *m.PreThroughput > *m.LagThreshold:
			// The sink stalled for a whole second while the producer kept
			// going at more than the threshold per second, so a backlog
			// above the threshold built up that the lag series does not
			// show: it was not measured (e.g. while the source was paused).
			m.LagNote = LagNotMeasured
		default:
			m.LagRecoverySec, m.LagNote = ptr(sec), note
		}
	}
	var peak float64
	found := false
	for _, pts := range s.BatchMaxByTask {
		if v, ok := WindowMax(cleanPoints(pts), start, end+LatencySlackSec); ok {
			peak, found = max(peak, v), true
		}
	}
	if found {
		m.PeakBatchUs = ptr(peak)
	}
	return m
}

func ptr(v float64) *float64 { return &v }

// LagThreshold is the lag under which the source counts as caught up:
// max(LagFactor × preMean, preMean + LagSlackRecords).
func LagThreshold(preMean float64) float64 {
	return max(LagFactor*preMean, preMean+LagSlackRecords)
}

// cleanPoints returns the finite points sorted by second (stable).
func cleanPoints(points []metrics.Point) []metrics.Point {
	out := make([]metrics.Point, 0, len(points))
	for _, p := range points {
		if isFinite(p.Sec) && isFinite(p.Value) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b metrics.Point) int {
		switch {
		case a.Sec < b.Sec:
			return -1
		case a.Sec > b.Sec:
			return 1
		}
		return 0
	})
	return out
}

// WindowMean is the mean and the minimum of the points whose second lies
// wholly in [from, to) (Sec ≥ from and Sec+1 ≤ to), and how many there are.
// Missing seconds are skipped, not counted as zero. Points must be sorted.
func WindowMean(pts []metrics.Point, from, to float64) (mean, lo float64, n int) {
	var sum float64
	lo = math.Inf(1)
	for _, p := range pts {
		if p.Sec >= from && p.Sec+1 <= to {
			sum += p.Value
			lo = min(lo, p.Value)
			n++
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return sum / float64(n), lo, n
}

// WindowMin is the minimum over the points whose second overlaps [from, to]
// (Sec < to and Sec+1 > from; an empty interval means the second containing
// from). A run of stallMissingSeconds or more missing seconds between two
// points that overlaps the window counts as zero (the operator reported
// nothing, i.e. it was stalled); a single missing second is taken for timer
// jitter (its records land in a neighbouring second) and skipped. ok is false
// if the window holds no point and no such stall. Points must be sorted.
func WindowMin(pts []metrics.Point, from, to float64) (v float64, ok bool) {
	if to <= from {
		to = math.Nextafter(from, math.Inf(1))
	}
	v = math.Inf(1)
	for i, p := range pts {
		if p.Sec < to && p.Sec+1 > from {
			v, ok = min(v, p.Value), true
		}
		if i+1 < len(pts) {
			gapFrom, gapTo := p.Sec+1, pts[i+1].Sec // missing seconds [gapFrom, gapTo)
			if math.Round(gapTo-gapFrom) >= stallMissingSeconds && gapFrom < to && gapTo > from {
				v, ok = 0, true
			}
		}
	}
	if !ok {
		return 0, false
	}
	return v, true
}

// WindowMax is the maximum over the points whose second overlaps [from, to]
// (as WindowMin, without the stall rule). Points must be sorted by second
// only for consistency; order does not matter here.
func WindowMax(pts []metrics.Point, from, to float64) (v float64, ok bool) {
	if to <= from {
		to = math.Nextafter(from, math.Inf(1))
	}
	v = math.Inf(-1)
	for _, p := range pts {
		if isFinite(p.Value) && p.Sec < to && p.Sec+1 > from {
			v, ok = max(v, p.Value), true
		}
	}
	if !ok {
		return 0, false
	}
	return v, true
}

// lagNoteShort abbreviates the lag notes for table cells; the notes
// section under the table spells them out.
var lagNoteShort = map[string]string{
	LagNeverRecovered:                        "never",
	LagNoData:                                "no data",
	LagNotMeasured:                           "unmeasured",
	"no lag data before the reconfiguration": "no data",
	"no reconfiguration":                     "no reconfig",
}

// Notes of LagRecovery.
const (
	LagRecovered      = ""                               // rose above the threshold and came back
	LagNoRise         = "lag never rose above threshold" // recovery 0 s
	LagNeverRecovered = "never recovered"
	LagNoData         = "no lag data after the reconfiguration start"
	// LagNotMeasured is set by ComputeRunMetrics when the lag never rose
	// although the sink throughput fell to zero: the backlog was not
	// measured, so no recovery time is given.
	LagNotMeasured = "lag not measured: flat while the sink stalled"
)

// LagRecovery returns the seconds from start until the lag, having risen
// above threshold at or after start, is back at or under it and stays there
// for LagStaySec: the first point t after the first rise with value ≤
// threshold whose next point is at most LagStaySec later, and every point
// in [t, t+LagStaySec) ≤ threshold. The result is max(0, t − start).
//
// Only points whose second overlaps [start, horizon) count (the drain after
// the input ends always empties the lag, so it must not count as recovery).
// If the lag never rises above the threshold the recovery is 0 (note
// LagNoRise); if it rises and does not come back the note is
// LagNeverRecovered. Points must be sorted.
func LagRecovery(lag []metrics.Point, start, threshold, horizon float64) (sec float64, note string) {
	var w []metrics.Point
	for _, p := range lag {
		if p.Sec+1 > start && p.Sec+1 <= horizon {
			w = append(w, p)
		}
	}
	if len(w) == 0 {
		return 0, LagNoData
	}
	rose := slices.IndexFunc(w, func(p metrics.Point) bool { return p.Value > threshold })
	if rose < 0 {
		return 0, LagNoRise
	}
	for i := rose + 1; i+1 < len(w); i++ {
		t := w[i].Sec
		if w[i].Value > threshold || w[i+1].Sec-t > LagStaySec {
			continue
		}
		stays := true
		for k := i + 1; k < len(w) && w[k].Sec < t+LagStaySec; k++ {
			if w[k].Value > threshold {
				stays = false
				break
			}
		}
		if stays && w[i+1].Value <= threshold {
			return max(0, t-start), LagRecovered
		}
	}
	return 0, LagNeverRecovered
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of the finite
// values; ok is false when there are none.
func Percentile(values []float64, p float64) (float64, bool) {
	vs := make([]float64, 0, len(values))
	for _, v := range values {
		if isFinite(v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 || !(p > 0) {
		return 0, false
	}
	slices.Sort(vs)
	rank := int(math.Ceil(min(p, 100) / 100 * float64(len(vs))))
	return vs[max(rank, 1)-1], true
}

// SumValues is the sum of the finite values of the points.
func SumValues(pts []metrics.Point) float64 {
	var s float64
	for _, p := range pts {
		if isFinite(p.Value) {
			s += p.Value
		}
	}
	return s
}

// Shift returns the finite points with zero subtracted from each second, so
// that the runs of a comparison line up on their reconfiguration start.
func Shift(pts []metrics.Point, zero float64) []metrics.Point {
	out := cleanPoints(pts)
	for i := range out {
		out[i].Sec -= zero
	}
	return out
}

// ---------------------------------------------------------------- comparison

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

	Produced   int64 `json:"produced"`
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`

	RunMetrics
	// MetricsError is set when the ClickHouse reads failed.
	MetricsError string `json:"metrics_error,omitempty"`

	Reconfigs []ReconfigSummary `json:"reconfigs,omitempty"`
	// ControlPlaneMs is the summed duration of the reconfigurations.
	ControlPlaneMs float64 `json:"control_plane_ms"`
	// ReconfigSpan is the reconfiguration interval on the metric axis.
	ReconfigSpan []Interval `json:"reconfig_span,omitempty"`

	// Series aligned on the first reconfiguration's start (= 0 s).
	SinkAligned []metrics.Point `json:"sink_throughput_aligned,omitempty"`
	LagAligned  []metrics.Point `json:"kafka_lag_aligned,omitempty"`
}

// ExactnessViolated reports whether a completed run lost or duplicated records.
func (r CompareRow) ExactnessViolated() bool {
	return r.Status == StatusOK && (r.Lost != 0 || r.Duplicated != 0)
}

// Comparison is the outcome of `koala compare`.
type Comparison struct {
	Experiment string       `json:"experiment"`
	Config     string       `json:"config"`
	Started    time.Time    `json:"started"`
	Rows       []CompareRow `json:"rows"`
}

// Violations lists "protocol: lost=N duplicated=M" for every completed run
// whose exactness failed.
func (c Comparison) Violations() []string {
	var out []string
	for _, r := range c.Rows {
		if r.ExactnessViolated() {
			out = append(out, fmt.Sprintf("%s: lost=%d duplicated=%d", r.Protocol, r.Lost, r.Duplicated))
		}
	}
	return out
}

var compareHeader = []string{
	"protocol", "pre ev/s", "pre min", "min ev/s", "min/pre", "lag recovery", "peak lag",
	"peak batch", "pre p99 batch", "migrated", "control plane", "lost", "dup",
}

// cells renders one row's table cells (without the status note).
func (r CompareRow) cells() []string {
	if r.Status != StatusOK {
		return nil
	}
	ratio := "n/a"
	if r.MinRatio != nil {
		ratio = fmt.Sprintf("%.2f", *r.MinRatio)
		if *r.MinRatio < TargetMinRatio {
			ratio += " <0.9"
		}
	}
	rec := "n/a"
	if r.LagRecoverySec != nil {
		rec = fmt.Sprintf("%.1f s", *r.LagRecoverySec)
		if r.LagNote == LagNoRise {
			rec += " (no rise)"
		}
	} else if short := lagNoteShort[r.LagNote]; short != "" {
		rec = "n/a (" + short + ")"
	}
	lost, dup := fmt.Sprint(r.Lost), fmt.Sprint(r.Duplicated)
	if r.Lost != 0 {
		lost += " !!"
	}
	if r.Duplicated != 0 {
		dup += " !!"
	}
	return []string{
		r.Protocol, numOrNA(r.PreThroughput, "%.0f"), numOrNA(r.PreMinThroughput, "%.0f"), numOrNA(r.MinThroughput, "%.0f"), ratio, rec,
		numOrNA(r.PeakLag, "%.0f"), usOrNA(r.PeakBatchUs), usOrNA(r.PreBatchP99Us),
		bytesText(r.BytesMigrated), msText(r.ControlPlaneMs, len(r.Reconfigs) > 0), lost, dup,
	}
}

func numOrNA(v *float64, format string) string {
	if v == nil || !isFinite(*v) {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

func usOrNA(v *float64) string {
	if v == nil || !isFinite(*v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", *v/1000)
}

func msText(ms float64, ok bool) string {
	if !ok || !isFinite(ms) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f ms", ms)
}

// bytesText renders a byte count in B, KB, MB or GB (powers of 1000).
func bytesText(b float64) string {
	switch {
	case !isFinite(b):
		return "n/a"
	case b < 1000:
		return fmt.Sprintf("%.0f B", b)
	case b < 1e6:
		return fmt.Sprintf("%.1f KB", b/1e3)
	case b < 1e9:
		return fmt.Sprintf("%.1f MB", b/1e6)
	}
	return fmt.Sprintf("%.2f GB", b/1e9)
}

func (r CompareRow) note() string {
	s := r.Status
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

func (r CompareRow) stepsText() string {
	var parts []string
	for _, rc := range r.Reconfigs {
		var steps []string
		for _, st := range rc.Steps {
			steps = append(steps, fmt.Sprintf("%s %.0f", st.Step, st.Millis))
		}
		parts = append(parts, fmt.Sprintf("%.0f ms = %s", rc.Millis, strings.Join(steps, " + ")))
	}
	return strings.Join(parts, "; ")
}

// WriteTable writes the comparison as an aligned text table, one row per
// protocol, then the control-plane steps of each run and any exactness
// violation in capitals.
func (c Comparison) WriteTable(w io.Writer) error {
	var b strings.Builder
	rows := [][]string{compareHeader}
	for _, r := range c.Rows {
		if cs := r.cells(); cs != nil {
			rows = append(rows, cs)
		}
	}
	widths := make([]int, len(compareHeader))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	line := func(row []string) {
		for i, cell := range row {
			pad := widths[i] - len([]rune(cell))
			if i == 0 {
				b.WriteString(cell + strings.Repeat(" ", pad))
			} else {
				b.WriteString("  " + strings.Repeat(" ", pad) + cell)
			}
		}
		b.WriteString("\n")
	}
	line(compareHeader)
	for _, r := range c.Rows {
		if cs := r.cells(); cs != nil {
			line(cs)
		} else {
			fmt.Fprintf(&b, "%-*s  %s\n", widths[0], r.Protocol, r.note())
		}
	}
	b.WriteString("\ncontrol plane (ms per step)\n")
	for _, r := range c.Rows {
		if r.Status == StatusOK {
			fmt.Fprintf(&b, "  %-*s  %s\n", widths[0], r.Protocol, orDash(r.stepsText()))
		}
	}
	if notes := c.notes(); len(notes) > 0 {
		b.WriteString("\nnotes\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	if v := c.Violations(); len(v) > 0 {
		b.WriteString("\n!!! EXACTNESS VIOLATED (lost and duplicated must be 0): " + strings.Join(v, "; ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// notes explains, per completed run, a lag recovery that is not a number
// and a failed metrics read.
func (c Comparison) notes() []string {
	var out []string
	for _, r := range c.Rows {
		if r.Status != StatusOK {
			continue
		}
		if r.LagRecoverySec == nil && r.LagNote != "" {
			n := r.Protocol + ": lag recovery n/a: " + r.LagNote
			if r.LagNote == LagNotMeasured {
				n += " (the source's kafka_lag stayed under the threshold although the sink delivered nothing for a second or more)"
			}
			out = append(out, n)
		}
		if r.MetricsError != "" {
			out = append(out, r.Protocol+": metrics: "+r.MetricsError)
		}
	}
	return out
}

// Markdown renders the comparison as a markdown document with the metrics
// table and the control-plane steps.
func (c Comparison) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Protocol comparison: %s\n\n", c.Experiment)
	fmt.Fprintf(&b, "Config `%s`, started %s. Each protocol ran the same experiment once, one after another.\n\n",
		c.Config, c.Started.UTC().Format(time.RFC3339))
	b.WriteString("| " + strings.Join(compareHeader, " | ") + " |\n")
	b.WriteString("|" + strings.Repeat("---|", len(compareHeader)) + "\n")
	for _, r := range c.Rows {
		cs := r.cells()
		if cs == nil {
			cs = make([]string, len(compareHeader))
			cs[0] = r.Protocol
			cs[1] = r.note()
		}
		for i := range cs {
			cs[i] = strings.ReplaceAll(cs[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cs, " | ") + " |\n")
	}
	b.WriteString("\n## Control plane\n\n| protocol | workflow | steps (ms) |\n|---|---|---|\n")
	for _, r := range c.Rows {
		if r.Status == StatusOK {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Protocol, r.WorkflowID, orDash(r.stepsText()))
		}
	}
	if notes := c.notes(); len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	if v := c.Violations(); len(v) > 0 {
		b.WriteString("\n**EXACTNESS VIOLATED** (lost and duplicated must be 0): " + strings.Join(v, "; ") + "\n")
	}
	fmt.Fprintf(&b, "\n## Definitions\n\n"+
		"- *pre ev/s*: mean sink events/s over the seconds before the first reconfiguration, skipping the first %.0f s.\n"+
		"- *pre min*: smallest 1 s sink throughput in that window (the noise floor of *min ev/s*).\n"+
		"- *min ev/s*: minimum 1 s sink throughput from reconfiguration start to end + %.0f s (≥ %d missing seconds count as 0); *min/pre* target ≥ %.1f.\n"+
		"- *lag recovery*: from reconfiguration start until the source Kafka lag is ≤ max(%.1f × pre mean, pre mean + %d) for %.0f s; \"no rise\" = it never exceeded that.\n"+
		"- *peak batch*: max batch_time_max_us of the target operator's tasks in [start, end + %.0f s]; *pre p99 batch*: p%.0f of the same per-task samples before the reconfiguration.\n"+
		"- *migrated*: sum of bytes_transferred of the target operator; *control plane*: total reconfiguration workflow time.\n",
		CompareWarmupSec, ResumeSlackSec, stallMissingSeconds, TargetMinRatio, LagFactor, LagSlackRecords, LagStaySec, LatencySlackSec, BatchLatencyPctl)
	return b.String()
}

// Files written by WriteFiles.
const (
	CompareJSONFile       = "compare.json"
	CompareMarkdownFile   = "compare.md"
	CompareThroughputFile = "throughput.png"
	CompareLagFile        = "kafka-lag.png"
)

// WriteFiles writes compare.json, compare.md and, when some run has
// series, the throughput and Kafka lag plots (one line per protocol, aligned
// on the reconfiguration start) into dir. It returns the paths written.
func (c Comparison) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("compare: encode json: %w", err)
	}
	p := filepath.Join(dir, CompareJSONFile)
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
		return nil, err
	}
	paths = append(paths, p)
	p = filepath.Join(dir, CompareMarkdownFile)
	if err := os.WriteFile(p, []byte(c.Markdown()), 0o644); err != nil {
		return paths, err
	}
	paths = append(paths, p)

	var sink, lag []Series
	var markers []Marker
	for _, r := range c.Rows {
		if r.Status != StatusOK {
			continue
		}
		if len(r.SinkAligned) > 0 {
			sink = append(sink, Series{Label: r.Protocol, Points: r.SinkAligned})
		}
		if len(r.LagAligned) > 0 {
			lag = append(lag, Series{Label: r.Protocol, Points: r.LagAligned})
		}
		if len(r.ReconfigSpan) > 0 {
			sp := r.ReconfigSpan
			markers = append(markers, Marker{Sec: sp[len(sp)-1].End - sp[0].Start, Label: r.Protocol + " done"})
		}
	}
	if len(sink) == 0 && len(lag) == 0 {
		return paths, nil
	}
	markers = append([]Marker{{Sec: 0, Label: "reconfiguration start"}}, markers...)
	if len(sink) > 0 {
		p = filepath.Join(dir, CompareThroughputFile)
		if err := WriteTimeSeriesPNG(p, c.Experiment+": sink throughput per protocol", "events/s", sink, markers); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	if len(lag) > 0 {
		p = filepath.Join(dir, CompareLagFile)
		title := c.Experiment + ": source Kafka lag per protocol"
		if allZero(lag) {
			title += " (all zero)"
		}
		if err := WriteTimeSeriesPNG(p, title, "records", lag, markers); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func allZero(series []Series) bool {
	for _, s := range series {
		for _, p := range s.Points {
			if p.Value != 0 {
				return false
			}
		}
	}
	return true
}

// BuildRow fills a completed run's row from its workflow result and the
// series read from ClickHouse (sr; its Reconfigs and InputEnd are derived
// here from res when zero, using jobStart to place them on the metric axis).
// It is pure.
func BuildRow(row CompareRow, res workflows.ExperimentResult, totalSec int, jobStart time.Time, sr RunSeries) CompareRow {
	row.Status = StatusOK
	row.JobID = res.JobID
	row.Produced, row.Lost, row.Duplicated = res.Produced, res.Lost, res.Duplicated
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
		rs := ReconfigSummary{ID: rc.ID, Protocol: rc.Protocol, Millis: (rc.EndSec - rc.StartSec) * 1000}
		for _, st := range rc.Steps {
			rs.Steps = append(rs.Steps, StepSummary{Step: st.Step, Millis: st.Millis})
		}
		row.Reconfigs = append(row.Reconfigs, rs)
		row.ControlPlaneMs += rs.Millis
	}
	row.RunMetrics = ComputeRunMetrics(sr)
	if len(sr.Reconfigs) > 0 {
		zero := sr.Reconfigs[0].Start
		row.SinkAligned = Shift(sr.Sink, zero)
		row.LagAligned = Shift(sr.Lag, zero)
	}
	return row
}
