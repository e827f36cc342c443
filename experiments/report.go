package experiments

import (
	"fmt"
	"path/filepath"
	"time"

	"koala/workflows"
)

// ReportMeta names a finished run and where its files go.
type ReportMeta struct {
	Experiment, WorkflowID, RunID, UIURL string
	Dir                                  string // results directory of this run
}

// Report turns a finished experiment into its summary and writes the
// throughput-over-time plot (source and sink, with reconfiguration markers)
// into meta.Dir.
func Report(res workflows.ExperimentResult, meta ReportMeta) (Summary, error) {
	s := Summary{
		Experiment: meta.Experiment, WorkflowID: meta.WorkflowID, RunID: meta.RunID, UIURL: meta.UIURL,
		Produced: res.Produced, SinkReceived: int64(res.Sink.Received), SinkDistinct: int64(res.Sink.Distinct),
		Lost: res.Lost, Duplicated: res.Duplicated, ExactnessUnchecked: res.ExactnessUnchecked,
		Reordered: res.Reordered, OrderUnchecked: res.OrderUnchecked,
	}
	// Reconfiguration times count from StartedAt, metric seconds from the
	// job's first metric row; shift the former onto the metrics' axis.
	offset := 0.0
	if !res.MetricsStart.IsZero() && !res.StartedAt.IsZero() {
		offset = res.StartedAt.Sub(res.MetricsStart).Seconds()
	}
	var markers []Marker
	first, last := -1.0, -1.0
	for _, rc := range res.Reconfigs {
		rc.StartSec += offset
		rc.EndSec += offset
		rs := ReconfigSummary{ID: rc.ID, Protocol: rc.Protocol, Millis: (rc.EndSec - rc.StartSec) * 1000, Moves: rc.Moves}
		for _, st := range rc.Steps {
			rs.Steps = append(rs.Steps, StepSummary{Step: st.Step, Millis: st.Millis})
		}
		s.Reconfigs = append(s.Reconfigs, rs)
		markers = append(markers, Marker{Sec: rc.StartSec, Label: fmt.Sprintf("%s %s→%d", rc.Spec.Type, rc.Spec.TargetOperator, rc.Spec.TargetParallelism)})
		if first < 0 {
			first = rc.StartSec
		}
		last = rc.EndSec
	}
	if len(res.SinkThroughput) > 0 {
		if first < 0 {
			first, last = 1e18, 1e18
		}
		s.ThroughputBefore, s.MinThroughputDuring, s.ThroughputAfter = ThroughputWindows(res.SinkThroughput, first, last)
	}
	if !res.StartedAt.IsZero() {
		s.Elapsed = time.Since(res.StartedAt).Round(time.Second)
	}
	if len(res.SinkThroughput) > 0 || len(res.SourceThroughput) > 0 {
		s.PlotPath = filepath.Join(meta.Dir, "throughput.png")
		series := []Series{{Label: "source input", Points: res.SourceThroughput}, {Label: "sink input", Points: res.SinkThroughput}}
		if err := WriteTimeSeriesPNG(s.PlotPath, meta.Experiment+": throughput", "events/s", series, markers); err != nil {
			return s, fmt.Errorf("write plot: %w", err)
		}
	}
	return s, nil
}
