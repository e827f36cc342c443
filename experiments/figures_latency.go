package experiments

import (
	"fmt"
	"slices"

	"koala/dataplane/metrics"
)

// Per-batch latency over time (Fig 8). Runs whose workers wrote per-second
// HDR histograms of their batch times (task_metrics.batch_time_hdr) are
// drawn from those: per second, the histograms of all the operator's tasks
// are merged into one and its p99 and p50 plotted, so each point is a
// percentile of that second's individual batches. Older runs have no
// histogram rows and fall back to the per-second aggregates (max over tasks
// of batch_time_max_us, mean over tasks of batch_time_avg_us); the legend
// and the axis labels say which a line is.

// BatchPercentilesPerSecond merges, per second, the histograms of all tasks
// of that second and returns the p50 and p99 of each merged histogram in µs,
// sorted by second. Seconds without a batch are absent. A histogram that
// does not decode fails the whole series (the caller falls back to the
// per-second aggregates and reports the error).
func BatchPercentilesPerSecond(samples []metrics.BatchHistSample) (p50, p99 []metrics.Point, err error) {
	bySec := map[float64][]string{}
	for _, s := range samples {
		if isFinite(s.Sec) && s.Hist != "" {
			bySec[s.Sec] = append(bySec[s.Sec], s.Hist)
		}
	}
	secs := make([]float64, 0, len(bySec))
	for s := range bySec {
		secs = append(secs, s)
	}
	slices.Sort(secs)
	for _, sec := range secs {
		p, ok, err := metrics.MergeBatchHists(bySec[sec])
		if err != nil {
			return nil, nil, fmt.Errorf("second %.0f: %w", sec, err)
		}
		if !ok {
			continue
		}
		p50 = append(p50, metrics.Point{Sec: sec, Value: float64(p.P50Us)})
		p99 = append(p99, metrics.Point{Sec: sec, Value: float64(p.P99Us)})
	}
	return p50, p99, nil
}

// BatchLatency is what Fig 8 draws of one run, in µs per second on the
// run's metric axis: High is the main line (HDR p99, else the per-second
// max), Mid the typical batch (HDR p50, else the per-second mean).
type BatchLatency struct {
	HDR       bool
	High, Mid []metrics.Point
}

// Latency is the run's per-batch latency from its histograms when it has
// any, else from the per-second aggregates.
func (fr FigureRun) Latency() BatchLatency {
	if len(fr.BatchP99) > 0 {
		return BatchLatency{HDR: true, High: fr.BatchP99, Mid: fr.BatchP50}
	}
	return BatchLatency{High: fr.BatchMax, Mid: fr.BatchAvg}
}

// Legend suffixes and axis labels of Fig 8.
const (
	fig8AggHighSuffix = " (per-s max, no HDR)"
	fig8AggMidSuffix  = " (per-s mean, no HDR)"
)

// Fig8Panels are Fig 8's two panels for the runs of one experiment, aligned
// on the reconfiguration start and cropped to the figure window, in ms:
// the p99 panel (the main one) and the p50 panel, one line per run in the
// same order and colours. A run without histogram rows is drawn from the
// per-second aggregates with its legend saying so; the panels' y labels
// say which kind the lines are.
func Fig8Panels(runs []FigureRun) (p99, p50 Panel) {
	hdr, agg := 0, 0
	for _, r := range runs {
		l := r.Latency()
		zero := r.ReconfigZero()
		crop := func(pts []metrics.Point) []metrics.Point {
			return scale(Window(Shift(pts, zero), -FigSecondsBefore, FigSecondsAfter), 1e-3)
		}
		hi, mid := r.Entry.Keyword, r.Entry.Keyword
		if l.HDR {
			hdr++
		} else {
			agg++
			hi += fig8AggHighSuffix
			mid += fig8AggMidSuffix
		}
		p99.Series = append(p99.Series, Series{Label: hi, Points: crop(l.High)})
		p50.Series = append(p50.Series, Series{Label: mid, Points: crop(l.Mid)})
	}
	switch {
	case agg == 0:
		p99.YLabel, p50.YLabel = "p99 batch time (ms)", "p50 batch time (ms)"
	case hdr == 0:
		p99.YLabel, p50.YLabel = "per-s max batch time (ms)", "per-s mean batch time (ms)"
	default:
		p99.YLabel, p50.YLabel = "p99 or per-s max (ms)", "p50 or per-s mean (ms)"
	}
	return p99, p50
}

// fig8Title names the experiment, the operator and where the lines come
// from.
func fig8Title(experiment string, runs []FigureRun) string {
	hdr, agg := 0, 0
	target := ""
	for _, r := range runs {
		if r.Latency().HDR {
			hdr++
		} else {
			agg++
		}
		if target == "" {
			target = r.Target
		}
	}
	t := "Fig 8 " + experiment + ": per-batch latency"
	if target != "" {
		t += " of " + target
	}
	switch {
	case agg == 0:
		return t + " (HDR histograms of all tasks merged per second)"
	case hdr == 0:
		return t + " (per-second aggregates: runs have no HDR histograms)"
	}
	return t + " (HDR per second; runs marked no HDR: per-second aggregates)"
}
