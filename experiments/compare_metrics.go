package experiments

import (
	"math"
	"slices"

	"koala/dataplane/metrics"
)

// Interval is a reconfiguration's [Start, End] in seconds on a run's metric
// axis (seconds since the job's first metric row).
type Interval struct {
	Start float64 `json:"start_sec"`
	End   float64 `json:"end_sec"`
}

// RunSeries is what the comparison reads of one run; all points are on the
// job's metric axis and per second (a point at Sec s covers [s, s+1)).
type RunSeries struct {
	Sink []metrics.Point // sink records_in per second
	// TargetIn is the reconfigured operator's records_in per second, summed
	// over its tasks (the first target operator's, when there are several).
	TargetIn       []metrics.Point
	Lag            []metrics.Point            // per-second sum of kafka_lag of the source tasks
	BatchMaxByTask map[string][]metrics.Point // batch_time_max_us per task of the target operator(s)
	Bytes          []metrics.Point            // per-second sum of bytes_transferred of the target operator(s)
	// BatchHists are the target operator(s)' per-task per-second HDR
	// histograms of individual batch times (batch_time_hdr).
	BatchHists []metrics.BatchHistSample
	Reconfigs  []Interval // the run's reconfigurations, on the metric axis
	// InputEnd is when the producer stopped (metric axis); later seconds
	// are the drain and are ignored by the lag and pre-scale windows.
	// 0 means unknown (the whole series is used).
	InputEnd float64
	// DrainLag is the lag of the pipeline keeping up (the rate probe's
	// last sustained step); 0: derived from the run's pre-scale seconds.
	DrainLag float64
	// HostBusy is this machine's busy cores per second (hostcpu) and
	// HostCPUs its CPU count; HostNotMeasured says why there is none
	// (both empty: the run was not sampled, e.g. made before sampling).
	HostBusy        []metrics.Point
	HostCPUs        int
	HostNotMeasured string
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

	// PreBatch and ReconfigBatch are percentiles of one HDR histogram of
	// the target operator's individual batch times, merged from its tasks'
	// per-second histograms: over the pre-scale seconds (the window of
	// PreThroughput), and over the seconds overlapping the window of
	// PeakBatchUs. nil when no batch ran there (or no histogram rows).
	PreBatch      *metrics.BatchPercentiles `json:"pre_batch_hdr,omitempty"`
	ReconfigBatch *metrics.BatchPercentiles `json:"reconfig_batch_hdr,omitempty"`
	BatchHDRError string                    `json:"batch_hdr_error,omitempty"`
	// TriggerP99 is the worst per-second p99 batch time from the first
	// reconfiguration's start over TriggerWindowSec (compare_trigger_p99.go).
	TriggerP99 *TriggerP99 `json:"trigger_p99,omitempty"`

	// The throughput figures again, counted at the reconfigured operator's
	// input instead of the sink (compare_target_in.go).
	TargetIn *TargetInFigures `json:"target_in,omitempty"`

	BytesMigrated float64 `json:"bytes_migrated"`

	// Backlog: when the lag stopped growing and drained after the first
	// reconfiguration (backlog.go); nil without a reconfiguration.
	Backlog *Backlog `json:"backlog,omitempty"`
	// HostCPU: how busy the machine was before and after the first
	// reconfiguration (compare_hostcpu.go); nil for an unsampled run.
	HostCPU *HostCPUFigures `json:"host_cpu,omitempty"`
}

// ComputeRunMetrics derives the comparison figures of one run. It is pure.
// Without reconfigurations only the pre-scale figures (over the whole run
// after warm-up) and the bytes are computed.
func ComputeRunMetrics(s RunSeries) RunMetrics {
	var m RunMetrics
	sink, lag := CleanPoints(s.Sink), CleanPoints(s.Lag)
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
		for _, p := range CleanPoints(pts) {
			if p.Sec >= CompareWarmupSec && p.Sec+1 <= preEnd && p.Value > 0 {
				preBatch = append(preBatch, p.Value)
			}
		}
	}
	if v, ok := Percentile(preBatch, BatchLatencyPctl); ok {
		m.PreBatchP99Us = ptr(v)
	}
	m.PreBatch = m.batchWindow(s.BatchHists, func(sec float64) bool { return sec >= CompareWarmupSec && sec+1 <= preEnd })
	m.TargetIn = targetInFigures(CleanPoints(s.TargetIn), rcs, preEnd, horizon)
	trigger := math.NaN()
	if len(rcs) > 0 {
		trigger, _ = reconfigSpan(rcs)
	}
	m.HostCPU = hostCPUFigures(s.HostBusy, s.HostCPUs, s.HostNotMeasured, CompareWarmupSec, preEnd, trigger, horizon)
	if len(rcs) == 0 {
		m.LagNote = "no reconfiguration"
		return m
	}
	start, end := reconfigSpan(rcs)
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
	drain := s.DrainLag
	if drain <= 0 {
		drain, _ = drainLagOf(lag, CompareWarmupSec, start)
	}
	bl := BacklogFigures(lag, start, horizon, drain)
	m.Backlog = &bl
	var peak float64
	found := false
	for _, pts := range s.BatchMaxByTask {
		if v, ok := WindowMax(CleanPoints(pts), start, end+LatencySlackSec); ok {
			peak, found = max(peak, v), true
		}
	}
	if found {
		m.PeakBatchUs = ptr(peak)
	}
	rcTo := end + LatencySlackSec
	m.ReconfigBatch = m.batchWindow(s.BatchHists, func(sec float64) bool { return sec < rcTo && sec+1 > start })
	tp, err := triggerP99(s.BatchHists, start, m.PreBatch)
	if err != nil {
		m.BatchHDRError = err.Error()
	}
	m.TriggerP99 = tp
	return m
}

// batchWindow merges the histograms of the seconds in picks; a decoding
// error is kept in BatchHDRError and gives nil.
func (m *RunMetrics) batchWindow(samples []metrics.BatchHistSample, in func(sec float64) bool) *metrics.BatchPercentiles {
	var enc []string
	for _, s := range samples {
		if isFinite(s.Sec) && in(s.Sec) {
			enc = append(enc, s.Hist)
		}
	}
	p, ok, err := metrics.MergeBatchHists(enc)
	if err != nil {
		m.BatchHDRError = err.Error()
		return nil
	}
	if !ok {
		return nil
	}
	return &p
}

func ptr(v float64) *float64 { return &v }

// reconfigSpan is the first start and the last end of rcs (not empty).
func reconfigSpan(rcs []Interval) (start, end float64) {
	start, end = rcs[0].Start, rcs[0].End
	for _, r := range rcs {
		start, end = min(start, r.Start), max(end, r.End)
	}
	return start, end
}

// LagThreshold is the lag under which the source counts as caught up:
// max(LagFactor × preMean, preMean + LagSlackRecords).
func LagThreshold(preMean float64) float64 {
	return max(LagFactor*preMean, preMean+LagSlackRecords)
}

// CleanPoints returns the finite points sorted by second (stable).
func CleanPoints(points []metrics.Point) []metrics.Point {
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
	out := CleanPoints(pts)
	for i := range out {
		out[i].Sec -= zero
	}
	return out
}
