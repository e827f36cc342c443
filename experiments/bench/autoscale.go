package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/experiments"
	"koala/experiments/runner"
	"koala/workflows"
	"koala/workflows/autoscale"
)

// The autoscale phase: the autoscaler (the Autoscale workflow, started by
// the config's "Autoscaler" block as the run's child) rides out a 2× step
// of the input, once per protocol. Its config is a keyed counter whose
// counter has a synthetic cost per record (control.ParamSyntheticCost):
// a known true rate per task that grows with its parallelism on this
// 2-core host, where a CPU-bound counter could not show a scale-out
// paying off. The producers offer the config's RatePerSecond until
// AutoscaleStepSec, then twice that until the run ends.

// Rows of the autoscale phase.
const (
	RowAutoscaleLazy = "autoscale-lazy"
	RowAutoscaleSR   = "autoscale-sr"
)

// The episode: the step at AutoscaleStepSec of the producers' time, the
// baseline from AutoscaleBaselineFrom (after the job's warm-up) to the
// step, and AutoscaleWindowSec after the step — the goal's 60 s.
const (
	AutoscaleStepSec      = 25
	AutoscaleBaselineFrom = 8
	AutoscaleWindowSec    = 60
	// autoscaleTailSec runs the producers on past the window, so the
	// window's last seconds have their metric rows.
	autoscaleTailSec = 4
)

// Targets of the autoscale phase (the goal, lazy protocol).
const (
	TargetAutoscaleRecoverySec = 60.0
	TargetAutoscaleMinRatio    = 0.9
)

// AutoscaleRowSpec is one row: the protocol the reconfigurations run.
type AutoscaleRowSpec struct {
	Name     string
	Protocol string
}

// AutoscaleRows are the phase's rows, in run order.
var AutoscaleRows = []AutoscaleRowSpec{
	{Name: RowAutoscaleLazy, Protocol: workflows.ProtocolLazy},
	{Name: RowAutoscaleSR, Protocol: workflows.ProtocolStopAndRestart},
}

// AutoscaleRun is one row's run and figures.
type AutoscaleRun struct {
	Row        string `json:"row"`
	Protocol   string `json:"protocol"`
	Config     string `json:"config"`
	WorkflowID string `json:"workflow_id,omitempty"`
	JobID      string `json:"job_id,omitempty"`
	// Status is experiments.StatusOK when the figures were measured;
	// Reason says why not otherwise ("not measured").
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`

	PreRate          int      `json:"pre_rate"`
	PostRate         int      `json:"post_rate"`
	RuntimeSec       int      `json:"runtime_sec"`
	Cost             string   `json:"synthetic_cost"` // the counter's ParamSyntheticCost
	Policy           string   `json:"policy"`
	StartParallelism int      `json:"start_parallelism"`
	FinalParallelism int      `json:"final_parallelism"`
	Produced         int64    `json:"produced"`
	Lost             int64    `json:"lost"`
	Duplicated       int64    `json:"duplicated"`
	Ticks            int      `json:"ticks"`
	Changes          int      `json:"changes"`
	Holds            int      `json:"holds"`
	Decisions        []string `json:"decisions,omitempty"` // the changes and holds, as the autoscaler prints them
	// AutoscalerNote says where the decisions came from, or why they
	// could not be read.
	AutoscalerNote string           `json:"autoscaler_note,omitempty"`
	Figures        AutoscaleFigures `json:"figures"`
}

// benchAutoscale runs the selected rows one after another.
func benchAutoscale(ctx context.Context, e steadyEnv, rows map[string]bool) []AutoscaleRun {
	var out []AutoscaleRun
	for _, spec := range AutoscaleRows {
		if !rows[spec.Name] || ctx.Err() != nil {
			continue
		}
		if len(out) > 0 {
			runner.Sleep(ctx, e.o.Gap)
		}
		out = append(out, autoscaleRow(ctx, e, spec))
	}
	return out
}

// autoscaleInput is the row's experiment: the config with the step
// schedule, the row's protocol and no scheduled reconfigurations.
func autoscaleInput(o Options, spec AutoscaleRowSpec) (workflows.ExperimentInput, error) {
	in, err := experiments.LoadConfig(o.AutoscaleConfig)
	if err != nil {
		return in, err
	}
	if in.Autoscaler == nil {
		return in, fmt.Errorf("%s has no \"Autoscaler\" block: the run would not start the autoscaler", o.AutoscaleConfig)
	}
	if in.Producer.RatePerSec <= 0 {
		return in, fmt.Errorf("%s: RatePerSecond must be above 0 (the rate before the step)", o.AutoscaleConfig)
	}
	runner.DefaultBrokers(&in, o.Kafka)
	in.Name = in.Name + "-" + spec.Name
	in.Reconfigurations = nil
	in.ReconfigProtocol = spec.Protocol
	pol := *in.Autoscaler
	pol.Protocol = "" // the experiment's protocol is the row's
	in.Autoscaler = &pol
	in.TotalRuntimeSeconds = AutoscaleStepSec + AutoscaleWindowSec + autoscaleTailSec
	producers := int64(max(in.Producer.Producers, 1))
	per := int64(in.Producer.RatePerSec) * int64(produce.RateInterval) / int64(time.Second) / producers
	steps := int64(time.Second / produce.RateInterval)
	if in.Params == nil {
		in.Params = map[string]string{}
	}
	in.Params["RateLimiterConfig"] = fmt.Sprintf(`{"RateLimit": [%d, %d], "RateChangeInterval": [%d]}`, per, 2*per, AutoscaleStepSec*steps)
	return in, nil
}

// autoscaleRow runs one row and measures it.
func autoscaleRow(ctx context.Context, e steadyEnv, spec AutoscaleRowSpec) AutoscaleRun {
	o := e.o
	r := AutoscaleRun{Row: spec.Name, Protocol: spec.Protocol, Config: o.AutoscaleConfig, Status: experiments.StatusFailed}
	label := "[autoscale " + spec.Name + "]"
	notMeasured := func(why string) AutoscaleRun {
		r.Reason = why
		fmt.Println(label, "not measured:", why)
		return r
	}
	if e.ch == nil {
		return notMeasured("no ClickHouse: the autoscaler reads its metrics there, and so do the figures")
	}
	in, err := autoscaleInput(o, spec)
	if err != nil {
		return notMeasured(err.Error())
	}
	r.PreRate, r.PostRate, r.RuntimeSec = in.Producer.RatePerSec, 2*in.Producer.RatePerSec, in.TotalRuntimeSeconds
	r.Cost, r.Policy = in.Params[control.ParamSyntheticCost], runner.PolicyLine(in.Autoscaler.WithDefaults())
	r.StartParallelism = in.Parallelism["counter"]

	id := fmt.Sprintf("%s-%s", in.Name, e.stamp)
	run, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		return notMeasured(fmt.Sprintf("start workflow %s: %v", id, err))
	}
	r.WorkflowID = run.GetID()
	fmt.Printf("%s started %s: %s, %d ev/s doubling to %d at %d s, %s protocol, counter cost %s, autoscaler %s\n",
		label, id, in.QueryName, r.PreRate, r.PostRate, AutoscaleStepSec, spec.Protocol, r.Cost, r.Policy)
	res, err := runner.Follow(ctx, run, label, in.TotalRuntimeSeconds, runner.RunLimit(in, o.Margin))
	if err != nil {
		if runner.Stopping(ctx, err) {
			_ = runner.Stop(e.tc, run, "koala bench: "+err.Error())
		}
		return notMeasured("the run failed: " + err.Error())
	}
	runner.WriteRawResult(o.ResultsDir, "autoscale-"+spec.Name, res)
	r.JobID, r.Produced, r.Lost, r.Duplicated = res.JobID, res.Produced, res.Lost, res.Duplicated
	if spec, ok := res.Final.Job.Operator("counter"); ok {
		r.FinalParallelism = spec.Parallelism
	}
	readDecisions(ctx, e.tc, id, &r)
	runner.Sleep(ctx, o.FlushWait)

	// The figures: the source's reads and lag and the sink's records.
	reads, err := e.ch.ColumnSeries(ctx, res.JobID, "source", "records_in", "sum")
	if err != nil {
		return notMeasured("source reads: " + err.Error())
	}
	lag, err := e.ch.Lag(ctx, res.JobID)
	if err != nil {
		return notMeasured("Kafka lag: " + err.Error())
	}
	sink, err := e.ch.Throughput(ctx, res.JobID, runner.SinkOperator(res))
	if err != nil {
		return notMeasured("sink throughput: " + err.Error())
	}
	f, why := autoscaleEpisode(reads, lag, sink, EpisodeInput{
		PreRate: float64(r.PreRate), PostRate: float64(r.PostRate), NominalStep: AutoscaleStepSec, BaselineFrom: AutoscaleBaselineFrom, Window: AutoscaleWindowSec,
	})
	r.Figures = f
	if why != "" {
		return notMeasured(why)
	}
	r.Status = experiments.StatusOK
	fmt.Printf("%s step seen at %.0f s; lag %.2f s of input before it, peak %.2f s, %s; %d changes, %d holds; min 1 s sink / pre %.2f; counter %d → %d tasks\n",
		label, f.StepSec, f.Seconds.BaselineLag, f.Seconds.PeakLag, recoveryText(f), r.Changes, r.Holds, f.Seconds.MinOverPre(), r.StartParallelism, r.FinalParallelism)
	return r
}

// readDecisions fills the row's decisions from the autoscaler's result
// (it ends by itself once the job's input ended), or from its status
// query when it ended otherwise (cancelled with the run).
func readDecisions(ctx context.Context, tc client.Client, jobWorkflowID string, r *AutoscaleRun) {
	id := workflows.AutoscalerID(jobWorkflowID)
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var res workflows.AutoscaleResult
	var ds []autoscale.Decision
	err := tc.GetWorkflow(gctx, id, "").Get(gctx, &res)
	if err == nil {
		r.Ticks, r.Changes, ds = res.Ticks, res.Changes, res.Decisions
		r.AutoscalerNote = "autoscaler " + id + ": " + res.Ended
	} else {
		v, qerr := tc.QueryWorkflow(gctx, id, "", workflows.QueryAutoscaleStatus)
		var st workflows.AutoscaleStatus
		if qerr == nil {
			qerr = v.Get(&st)
		}
		if qerr != nil {
			r.AutoscalerNote = fmt.Sprintf("autoscaler %s: no result (%v) and no status (%v)", id, err, qerr)
			return
		}
		r.Ticks, r.Changes, ds = st.Ticks, st.Changes, st.Decisions
		why := err.Error()
		if temporal.IsCanceledError(err) {
			// The run closed before the autoscaler saw its input end.
			why = "cancelled when the run closed"
		}
		r.AutoscalerNote = fmt.Sprintf("autoscaler %s: %s; decisions from its status query", id, why)
	}
	for _, d := range ds {
		if len(d.Holds) > 0 {
			r.Holds++
		}
		if len(d.Changes) > 0 || len(d.Holds) > 0 {
			r.Decisions = append(r.Decisions, d.Line())
		}
	}
}

// recoveryText says when the lag was back at its pre-step level.
func recoveryText(f AutoscaleFigures) string {
	switch {
	case !f.Seconds.Recovered:
		return fmt.Sprintf("not back within %.0f s", f.EndSec-f.StepSec)
	case f.Seconds.RecoveredSec == 0:
		return "never above it"
	}
	return fmt.Sprintf("back %.0f s after the step", f.Seconds.RecoveredSec)
}

// Verdict judges the run against the goal (only the lazy row is judged).
func (r AutoscaleRun) Verdict() (string, string) {
	if r.Status != experiments.StatusOK {
		return VerdictUnknown, "not measured: " + r.Reason
	}
	f := r.Figures
	measured := fmt.Sprintf("%s; min 1 s throughput / pre %.2f (min %.0f / pre %.0f ev/s); %d changes, %d holds",
		recoveryText(f), f.Seconds.MinOverPre(), f.Seconds.MinThroughput, f.Seconds.PreThroughput, r.Changes, r.Holds)
	if r.Lost != 0 || r.Duplicated != 0 {
		measured += fmt.Sprintf("; EXACTNESS: lost %d, duplicated %d", r.Lost, r.Duplicated)
	}
	ok := f.Seconds.Recovered && f.Seconds.RecoveredSec <= TargetAutoscaleRecoverySec && f.Seconds.MinOverPre() >= TargetAutoscaleMinRatio
	return verdict(ok), measured
}

// autoscaleTargets is the targets table's row of the phase.
func (r BenchReport) autoscaleTargets() []TargetRow {
	target := fmt.Sprintf("autoscaler, lazy: Kafka lag back at its pre-step level ≤ %.0f s after a 2× input step, lowest 1 s throughput ≥ %.1f × pre", TargetAutoscaleRecoverySec, TargetAutoscaleMinRatio)
	for _, a := range r.Autoscale {
		if a.Protocol == workflows.ProtocolLazy {
			v, m := a.Verdict()
			return []TargetRow{{Target: target, Measured: m, Verdict: v, Source: "autoscale " + a.Row}}
		}
	}
	return []TargetRow{{Target: target, Measured: "n/a", Verdict: VerdictUnknown, Source: "autoscale not run"}}
}

// autoscaleMarkdown is the report's section of the phase.
func (r BenchReport) autoscaleMarkdown() string {
	var b strings.Builder
	b.WriteString("\n\n## Autoscaling: a 2× input step (DS2, `koala autoscale`)\n\n")
	if len(r.Autoscale) == 0 {
		b.WriteString("Not run (`--phases autoscale`).\n")
		return b.String()
	}
	a0 := r.Autoscale[0]
	fmt.Fprintf(&b, "Config `%s`: the keyed counter from 1 task, its counter given a synthetic cost (`%s=%s`: a wait per record, so a task's true rate is known and grows with the parallelism on this host), "+
		"the producers offering %d ev/s, then %d ev/s from second %d of their schedule; the run's \"Autoscaler\" block starts the Autoscale workflow beside it (%s). "+
		"One run per protocol. *Back at baseline*: the first second after the lag's peak in which the source's Kafka lag, in seconds of the offered input (lag ÷ offered rate), is at or below its highest level from second %d (after the warm-up) to the step; "+
		"*min / pre*: the lowest 1 s sink throughput from the step to %d s after it (seconds without sink rows count as 0) over the mean before it. The lag in records is shown beside it: at twice the rate twice as many records are in flight without any backlog.\n\n",
		a0.Config, control.ParamSyntheticCost, a0.Cost, a0.PreRate, a0.PostRate, AutoscaleStepSec, a0.Policy, AutoscaleBaselineFrom, AutoscaleWindowSec)
	b.WriteString("| row | protocol | step seen at | lag before → peak (s of input) | back at baseline | lag before → peak (records) | changes / holds | counter tasks | min / pre | lost / dup | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range r.Autoscale {
		v, _ := a.Verdict()
		if a.Protocol != workflows.ProtocolLazy {
			v = "(not judged)"
		}
		if a.Status != experiments.StatusOK {
			fmt.Fprintf(&b, "| %s | %s | not measured: %s |||||||| %s |\n", a.Row, a.Protocol, esc(a.Reason), v)
			continue
		}
		f := a.Figures
		fmt.Fprintf(&b, "| %s | %s | %.0f s | %.2f → %.2f s at +%.0f s | %s | %.0f → %.0f | %d / %d | %d → %d | %.2f (%.0f / %.0f ev/s) | %d / %d | %s |\n",
			a.Row, a.Protocol, f.StepSec, f.Seconds.BaselineLag, f.Seconds.PeakLag, f.Seconds.PeakSec-f.StepSec, recoveryText(f), f.Records.BaselineLag, f.Records.PeakLag,
			a.Changes, a.Holds, a.StartParallelism, a.FinalParallelism, f.Seconds.MinOverPre(), f.Seconds.MinThroughput, f.Seconds.PreThroughput, a.Lost, a.Duplicated, v)
	}
	for _, a := range r.Autoscale {
		fmt.Fprintf(&b, "\n%s (workflow `%s`%s):\n\n", a.Row, a.WorkflowID, noteText(a.AutoscalerNote))
		if len(a.Decisions) == 0 {
			b.WriteString("    no decision changed or held back a parallelism\n")
		}
		for _, d := range a.Decisions {
			b.WriteString("    " + d + "\n")
		}
	}
	return b.String()
}

func noteText(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}
