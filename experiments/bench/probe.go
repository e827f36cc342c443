package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"go.temporal.io/sdk/client"

	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/experiments"
	"koala/experiments/runner"
	"koala/workflows"
)

// Rate probe of the disruption phase: a reconfiguration's disruption
// depends on how close to its limit the pipeline runs, so the protocols
// run at DisruptionShare of the rate the pre-scale pipeline sustains,
// probed in the same bench run instead of a fixed rate. One run of the
// disruption config without its reconfigurations offers a staircase of
// rates (a RateLimiterConfig schedule, ProbeStepSec per step); a step is
// sustained when the source's Kafka lag (produced minus processed, records
// read ahead included) did not grow over it. The probed rate is the last
// sustained step before the first that was not.

// DisruptionShare is the share of the probed rate the protocols run at.
const DisruptionShare = 0.7

// Probe thresholds: the first ProbeSettleSec of a step are skipped (the
// rate just changed); a step's lag grew when it rose by more than
// ProbeLagSec of the step's rate and ProbeLagMinBatches batches over the
// rest; its producers fell short when, with the lag flat, the sink counted
// under ProbeProducedShare of the rate.
const (
	ProbeSettleSec     = 1
	ProbeLagSec        = 0.25
	ProbeLagMinBatches = 5
	ProbeProducedShare = 0.9
)

// Verdicts of a probe step.
const (
	StepSustained     = "sustained"
	StepLagGrew       = "lag grew"
	StepProducerBound = "producers fell short"
	StepNoData        = "no lag data"
)

// ProbeStep is one rate of the staircase.
type ProbeStep struct {
	Rate      int     `json:"rate"`     // offered, events/s (what the schedule gives all producers)
	FromSec   float64 `json:"from_sec"` // measured part, on the job's metric axis
	ToSec     float64 `json:"to_sec"`
	Counted   float64 `json:"counted_per_sec"` // the sink's records_in per second over it
	LagGrowth float64 `json:"lag_growth"`      // records: least-squares slope × its length
	Verdict   string  `json:"verdict"`
}

// RateProbe is the probe run and what it found.
type RateProbe struct {
	Config     string      `json:"config"`
	WorkflowID string      `json:"workflow_id,omitempty"`
	StepSec    int         `json:"step_sec"`
	Steps      []ProbeStep `json:"steps"`
	// Sustainable is the last sustained step's rate (0: none); Limit says
	// what ended the staircase.
	Sustainable int    `json:"sustainable"`
	Limit       string `json:"limit"`
	// RunRate is the rate the protocols ran at; Error why it is not
	// DisruptionShare × Sustainable (the config's rate was used).
	RunRate int    `json:"run_rate"`
	Error   string `json:"error,omitempty"`
}

// ProbeRates is the staircase: from, then × factor per step, up to max.
func ProbeRates(from int, factor float64, maxRate int) ([]int, error) {
	if from <= 0 || !(factor > 1) || maxRate < from {
		return nil, fmt.Errorf("probe rates from %d × %v up to %d: want from > 0, factor > 1 and max ≥ from", from, factor, maxRate)
	}
	var out []int
	for r := float64(from); r <= float64(maxRate)*1.0001; r *= factor {
		out = append(out, int(math.Round(r/100)*100))
	}
	return out, nil
}

// probeSchedule is the producers' RateLimiterConfig for the staircase and
// the rates it really offers (per-producer events per interval are whole).
func probeSchedule(rates []int, producers, stepSec int) (string, []int, error) {
	producers = max(producers, 1)
	perInterval := int(produce.RateInterval.Milliseconds())
	ivPerSec := 1000 / perInterval
	var s produce.RateSchedule
	offered := make([]int, len(rates))
	for i, r := range rates {
		n := int64(math.Round(float64(r) / float64(producers*ivPerSec)))
		s.RateLimit = append(s.RateLimit, n)
		s.RateChangeInterval = append(s.RateChangeInterval, int64(stepSec*ivPerSec))
		offered[i] = int(n) * producers * ivPerSec
	}
	if err := s.Validate(); err != nil {
		return "", nil, fmt.Errorf("probe schedule: %w", err)
	}
	data, err := json.Marshal(s)
	return string(data), offered, err
}

// AnalyzeProbe judges each step from the run's per-second lag and sink
// series (offset: the producers' start on the job's metric axis) and
// finds the sustainable rate. It is pure.
func AnalyzeProbe(rates []int, stepSec, batchSize int, offset float64, lag, counted []metrics.Point) RateProbe {
	p := RateProbe{StepSec: stepSec}
	lag, counted = experiments.CleanPoints(lag), experiments.CleanPoints(counted)
	for i, rate := range rates {
		st := ProbeStep{Rate: rate, FromSec: math.Ceil(offset + float64(i*stepSec+ProbeSettleSec)), ToSec: math.Floor(offset + float64((i+1)*stepSec))}
		var xs, ys []float64
		for _, pt := range lag {
			if pt.Sec >= st.FromSec && pt.Sec+1 <= st.ToSec {
				xs, ys = append(xs, pt.Sec), append(ys, pt.Value)
			}
		}
		var sum float64
		for _, pt := range counted {
			if pt.Sec >= st.FromSec && pt.Sec+1 <= st.ToSec {
				sum += pt.Value
			}
		}
		span := st.ToSec - st.FromSec
		if span > 0 {
			st.Counted = sum / span
		}
		slope, ok := Slope(xs, ys)
		switch {
		case !ok || span <= 0:
			st.Verdict = StepNoData
		case slope*span > max(ProbeLagSec*float64(rate), float64(ProbeLagMinBatches*max(batchSize, 1))):
			st.LagGrowth, st.Verdict = slope*span, StepLagGrew
		case st.Counted < ProbeProducedShare*float64(rate):
			st.LagGrowth, st.Verdict = slope*span, StepProducerBound
		default:
			st.LagGrowth, st.Verdict = slope*span, StepSustained
		}
		p.Steps = append(p.Steps, st)
		if st.Verdict != StepSustained {
			p.Limit = fmt.Sprintf("%s at %d ev/s", st.Verdict, rate)
			break
		}
		p.Sustainable = rate
	}
	if p.Limit == "" && len(rates) > 0 {
		p.Limit = fmt.Sprintf("every step up to the top, %d ev/s, was sustained: the limit is higher", rates[len(rates)-1])
	}
	return p
}

// runRate is the rate the protocols run at after the probe: DisruptionShare
// of the probed rate, or the config's when the probe found none (Error
// says so).
func (p *RateProbe) runRate(configRate int) {
	if p.Sustainable > 0 {
		p.RunRate = int(math.Round(DisruptionShare * float64(p.Sustainable)))
		return
	}
	if p.Error == "" {
		p.Error = "no step was sustained (" + p.Limit + ")"
	}
	p.RunRate = configRate
}

// benchProbe runs the staircase on base (the disruption config) and
// analyses it.
func benchProbe(ctx context.Context, e steadyEnv, base workflows.ExperimentInput, rates []int, stepSec int) RateProbe {
	p := RateProbe{Config: e.o.DisruptionConfig, StepSec: stepSec}
	in := base
	in.Reconfigurations = nil
	in.Name = base.Name + "-probe"
	in.Params = map[string]string{}
	for k, v := range base.Params {
		in.Params[k] = v
	}
	sched, offered, err := probeSchedule(rates, in.Producer.Producers, stepSec)
	if err != nil {
		p.Error = err.Error()
		return p
	}
	in.Params["RateLimiterConfig"] = sched
	in.TotalRuntimeSeconds = len(rates) * stepSec
	// The top steps may leave a backlog to drain after the producers stop.
	in.DrainTimeoutSeconds = max(in.DrainTimeoutSeconds, 2*in.TotalRuntimeSeconds)
	id := fmt.Sprintf("%s-%s", in.Name, e.stamp)
	label := "[disruption probe]"
	run, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		p.Error = fmt.Sprintf("start workflow %s: %v", id, err)
		return p
	}
	p.WorkflowID = run.GetID()
	fmt.Printf("%s started %s: %d steps of %d s, %v ev/s\n", label, id, len(offered), stepSec, offered)
	res, err := runner.Follow(ctx, run, label, in.TotalRuntimeSeconds, runner.RunLimit(in, e.o.Margin))
	if err != nil {
		if errors.Is(err, runner.ErrGaveUp) {
			_ = runner.Terminate(e.tc, run, "koala bench: probe exceeded its time limit")
		}
		p.Error = err.Error()
		return p
	}
	runner.WriteRawResult(e.o.ResultsDir, "probe-"+in.QueryName, res)
	if e.ch == nil {
		p.Error = "no ClickHouse to read the lag from"
		return p
	}
	runner.Sleep(ctx, e.o.FlushWait)
	jobStart, err := e.ch.JobStart(ctx, res.JobID)
	if err != nil {
		p.Error = "job start: " + err.Error()
		return p
	}
	lag, err := e.ch.Lag(ctx, res.JobID)
	if err != nil {
		p.Error = "lag: " + err.Error()
		return p
	}
	counted, err := e.ch.Throughput(ctx, res.JobID, runner.SinkOperator(res))
	if err != nil {
		p.Error = "sink: " + err.Error()
		return p
	}
	offset := 0.0
	if !res.StartedAt.IsZero() {
		offset = res.StartedAt.Sub(jobStart).Seconds()
	}
	got := AnalyzeProbe(offered, stepSec, in.BatchSize, offset, lag, counted)
	got.Config, got.WorkflowID = p.Config, p.WorkflowID
	for _, st := range got.Steps {
		fmt.Printf("%s %7d ev/s offered: %8.0f at the sink, lag %+8.0f → %s\n", label, st.Rate, st.Counted, st.LagGrowth, st.Verdict)
	}
	return got
}
