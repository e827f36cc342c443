package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/experiments"
	"koala/workflows"
)

// Rate probe: a reconfiguration's disruption depends on how close to its
// limit the pipeline runs, so the bench's disruption phase and `koala
// compare --overload` set their rate from the rate the pre-scale pipeline
// sustains, probed in the same run of the command instead of guessed. One
// run of the config without its reconfigurations offers a staircase of
// rates (a RateLimiterConfig schedule, StepSec per step); a step is
// sustained when the source's Kafka lag (produced minus processed, records
// read ahead included) did not grow over it. The probed rate is the last
// sustained step before the first that was not and whose next step was
// not either.
//
// A lone step that fell behind, followed by a higher one that kept up, was
// a hiccup (a flush, a compaction, a collection): the pipeline sustained
// more right after it. Ending the staircase there made the offered load of
// a whole comparison depend on one 8 s window: azure's probe of 12-05
// 09:13 stopped at 21.6 K (lag +11 K over the step) where the same
// pipeline had sustained 37.3 K, and every protocol then ran without a
// backlog. Overload itself does not pass: the step after a real limit
// offers more still, and its lag grows too.

// Probe thresholds: the first ProbeSettleSec of a step are skipped (the
// rate just changed); a step's lag grew when it rose by more than
// ProbeLagSec of the step's rate and ProbeLagMinBatches batches over the
// rest; its producers fell short when, with the lag flat, the sink (the
// source for a query whose sink does not get every record, see
// probeCountOperator) counted under ProbeProducedShare of the rate.
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
	Counted   float64 `json:"counted_per_sec"` // the sink's (or source's: probeCountOperator) records_in per second over it
	LagMean   float64 `json:"lag_mean"`        // records, over the measured part
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
	// what ended the staircase; Hiccups are the rates of lone steps that
	// did not keep up, passed over because the next step did.
	Sustainable int    `json:"sustainable"`
	Limit       string `json:"limit"`
	Hiccups     []int  `json:"hiccups,omitempty"`
	// Share is the multiple of Sustainable the protocols ran at (the
	// bench's 0.7, compare's --overload); RunRate that rate; Error why it
	// is not Share × Sustainable (the config's rate was used).
	Share   float64 `json:"share,omitempty"`
	RunRate int     `json:"run_rate"`
	Error   string  `json:"error,omitempty"`
}

// SustainedLag is the mean lag over the last sustained step: what the
// source's lag is while the pipeline keeps up (its read-ahead and one
// second of input), 0 when no step was sustained.
func (p RateProbe) SustainedLag() float64 {
	for i := len(p.Steps) - 1; i >= 0; i-- {
		if p.Steps[i].Verdict == StepSustained {
			return p.Steps[i].LagMean
		}
	}
	return 0
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
		for _, y := range ys {
			st.LagMean += y / float64(len(ys))
		}
		slope, ok := experiments.Slope(xs, ys)
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
	}
	return judgeSteps(p)
}

// judgeSteps finds the sustainable rate in p's judged steps and keeps
// the steps up to the one that confirmed the limit.
func judgeSteps(p RateProbe) RateProbe {
	for i, st := range p.Steps {
		if st.Verdict == StepSustained {
			p.Sustainable = st.Rate
			continue
		}
		if i+1 < len(p.Steps) && p.Steps[i+1].Verdict == StepSustained {
			p.Hiccups = append(p.Hiccups, st.Rate)
			continue
		}
		p.Limit = fmt.Sprintf("%s at %d ev/s", st.Verdict, st.Rate)
		if i+1 < len(p.Steps) {
			p.Limit += fmt.Sprintf(" and at %d ev/s", p.Steps[i+1].Rate)
			p.Steps = p.Steps[:i+2]
		}
		break
	}
	if p.Limit == "" && len(p.Steps) > 0 {
		p.Limit = fmt.Sprintf("every step up to the top, %d ev/s, was sustained: the limit is higher", p.Steps[len(p.Steps)-1].Rate)
	}
	for _, r := range p.Hiccups {
		p.Limit += fmt.Sprintf("; passed over a lone step at %d ev/s that fell behind (the next step kept up)", r)
	}
	return p
}

// SetRunRate sets Share and RunRate: share × the probed rate, or the
// config's rate when the probe found none (Error says so).
func (p *RateProbe) SetRunRate(share float64, configRate int) {
	p.Share = share
	if p.Sustainable > 0 {
		p.RunRate = int(math.Round(share * float64(p.Sustainable)))
		return
	}
	if p.Error == "" {
		// The first step also carries the job's start-up (cold caches, the
		// source catching up), so a first rate near the limit can fail
		// where it would hold later.
		p.Error = "no step was sustained (" + p.Limit + "): start the staircase lower"
	}
	p.RunRate = configRate
}

// ProbeRun says where a probe's run goes and how it is waited for.
type ProbeRun struct {
	Config     string // the config's path, for the report
	Stamp      string // part of the workflow id
	Label      string // prefix of the progress lines
	ResultsDir string // where the raw result is kept
	FlushWait  time.Duration
	Margin     time.Duration
	Terminator string // names the command in a terminated workflow's reason
}

// Probe runs the staircase on base without its reconfigurations and
// analyses it. Failures are in the probe's Error.
func Probe(ctx context.Context, s Services, base workflows.ExperimentInput, rates []int, stepSec int, o ProbeRun) RateProbe {
	p := RateProbe{Config: o.Config, StepSec: stepSec}
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
	id := fmt.Sprintf("%s-%s", in.Name, o.Stamp)
	label := o.Label
	run, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		p.Error = fmt.Sprintf("start workflow %s: %v", id, err)
		return p
	}
	p.WorkflowID = run.GetID()
	fmt.Printf("%s started %s: %d steps of %d s, %v ev/s\n", label, id, len(offered), stepSec, offered)
	res, err := Follow(ctx, run, label, in.TotalRuntimeSeconds, RunLimit(in, o.Margin))
	if err != nil {
		if stopping(ctx, err) {
			_ = Stop(s.Temporal, run, o.Terminator+": probe: "+err.Error())
		}
		p.Error = err.Error()
		return p
	}
	WriteRawResult(o.ResultsDir, "probe-"+in.QueryName, res)
	if !s.KeepTopics {
		defer DropRunTopics(ctx, os.Stdout, in.KafkaBrokers, res.Topic)
	}
	if s.ClickHouse == nil {
		p.Error = "no ClickHouse to read the lag from"
		return p
	}
	Sleep(ctx, o.FlushWait)
	jobStart, err := s.ClickHouse.JobStart(ctx, res.JobID)
	if err != nil {
		p.Error = "job start: " + err.Error()
		return p
	}
	lag, err := s.ClickHouse.Lag(ctx, res.JobID)
	if err != nil {
		p.Error = "lag: " + err.Error()
		return p
	}
	countOp, at := probeCountOperator(res)
	counted, err := s.ClickHouse.Throughput(ctx, res.JobID, countOp)
	if err != nil {
		p.Error = at + ": " + err.Error()
		return p
	}
	offset := 0.0
	if !res.StartedAt.IsZero() {
		offset = res.StartedAt.Sub(jobStart).Seconds()
	}
	got := AnalyzeProbe(offered, stepSec, in.BatchSize, offset, lag, counted)
	got.Config, got.WorkflowID = p.Config, p.WorkflowID
	for _, st := range got.Steps {
		fmt.Printf("%s %7d ev/s offered: %8.0f at the %s, lag %+8.0f (mean %.0f) → %s\n", label, st.Rate, st.Counted, at, st.LagGrowth, st.LagMean, st.Verdict)
	}
	return got
}

// probeCountOperator is the operator whose records a probe step counts to
// tell whether the producers kept up: the sink, unless the query's sink
// does not get each input record once (a join's or filter's: q3's sink
// gets one result per matching auction, a few per cent of its input),
// when it is the source, which reads every record.
func probeCountOperator(res workflows.ExperimentResult) (op, at string) {
	if ops := res.Final.Job.Operators; res.ExactnessUnchecked != "" && len(ops) > 0 {
		return ops[0].Name, "source"
	}
	return SinkOperator(res), "sink"
}

// overloadProbe probes the rate base's pre-scale pipeline sustains and
// sets base's rate to o.Overload × it (the config's rate stays when the
// probe found none; the load says why).
func overloadProbe(ctx context.Context, o CompareOptions, base *workflows.ExperimentInput, rates []int, stamp, dir string) experiments.OfferedLoad {
	if _, ok := base.Params["RateLimiterConfig"]; ok {
		// The probe and the runs set the rate; a schedule would override it.
		delete(base.Params, "RateLimiterConfig")
		fmt.Println("  the config's RateLimiterConfig is left out: the probe and the runs set the rate")
	}
	p := Probe(ctx, o.Services, *base, rates, o.ProbeStepSec, ProbeRun{
		Config: o.Config, Stamp: stamp, Label: "[probe]", ResultsDir: dir, FlushWait: o.FlushWait, Margin: o.Margin, Terminator: "koala compare",
	})
	p.SetRunRate(o.Overload, base.Producer.RatePerSec)
	if p.Error == "" && p.Sustainable == rates[len(rates)-1] {
		// A multiple of a lower bound is no known overload.
		p.Error = fmt.Sprintf("every step up to %d ev/s was sustained, so the limit is not known: raise --probe-max", p.Sustainable)
	}
	load := experiments.OfferedLoad{Rate: p.RunRate, Share: p.Share, Sustainable: p.Sustainable, Limit: p.Limit, ProbeWorkflow: p.WorkflowID, Error: p.Error}
	if lag := p.SustainedLag(); p.Sustainable > 0 {
		load.DrainLag = experiments.LagThreshold(lag)
	}
	if base.Params[control.ParamLoadWarmUpData] == "true" {
		if m, err := activities.ReadSnapshotManifest(base.Params[control.ParamWarmUpSnapshotDir]); err == nil {
			load.StateBytes = m.Bytes
		}
	}
	base.Producer.RatePerSec = p.RunRate
	if p.Error == "" {
		fmt.Printf("[probe] sustainable %d ev/s (%s); the protocols run at %.2f × it, %d ev/s\n", p.Sustainable, p.Limit, o.Overload, p.RunRate)
	}
	return load
}
