package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/experiments/runner"
	"koala/workflows"

	"go.temporal.io/sdk/client"
)

// steadyEnv is what a measured run needs besides its row: the clients and
// the run's stamp. nats may be nil (the value-cache counters are then
// reported as not read).
type steadyEnv struct {
	o     Options
	tc    client.Client
	ch    *metrics.ClickHouse
	nats  natsRequester
	stamp string
}

// benchSteady runs one row's query without reconfiguration and measures
// it. snapshot, when set, is the warm-up snapshot the run loads (a
// large-state row; its config has LoadWarmUpData).
func benchSteady(ctx context.Context, e steadyEnv, row Row, snapshot string) Steady {
	o := e.o
	s := Steady{Row: row.Name, Phase: row.Phase, Operator: row.Operator, Unit: row.Unit, Tuned: row.Tuned,
		Target: row.PerCore, SustainedTarget: row.Sustained, MinStateBytes: row.MinStateBytes, Status: experiments.StatusFailed}
	in, err := experiments.LoadConfig(row.Config)
	if err != nil {
		s.Reason = err.Error()
		fmt.Printf("[steady %s] %s\n", row.Name, s.Reason)
		return s
	}
	runner.DefaultBrokers(&in, o.Kafka)
	if row.Rate > 0 {
		in.Producer.RatePerSec = row.Rate
	}
	if o.SteadySec > 0 {
		in.TotalRuntimeSeconds = o.SteadySec
	}
	in.Reconfigurations = nil
	if snapshot != "" {
		if in.Params == nil {
			in.Params = map[string]string{}
		}
		in.Params[control.ParamWarmUpSnapshotDir] = snapshot
	}
	s.Query, s.Backend, s.Rate, s.RuntimeSec = in.QueryName, in.StateBackend, in.Producer.RatePerSec, in.TotalRuntimeSeconds
	s.SourceTasks, s.OperatorTasks = in.Parallelism["source"], in.Parallelism[row.Operator]
	if s.FetchMinBytes, s.FetchMaxWaitMs, err = fetchSizes(in.Params); err != nil {
		s.Reason = err.Error()
		return s
	}
	label := "[" + row.Phase + " " + row.Name + "]"
	if e.ch == nil {
		s.Reason = "no ClickHouse"
		return s
	}

	ws := workerFiles(o.RunDir)
	if len(ws) == 0 {
		s.Reason = "no worker PID files under " + o.RunDir
		fmt.Println(label, s.Reason)
		return s
	}
	tasks, producers := placeProducers(&in, ws)
	s.WorkerPIDs, s.ProducerPIDs, s.ProducerWorkers = pidsOf(tasks), pidsOf(producers), in.ProducerWorkers
	s.TaskPlacement = in.Params[control.ParamTaskPlacement]
	pids := s.WorkerPIDs
	sampler := startCPUSampler(s.WorkerPIDs, s.ProducerPIDs, 500*time.Millisecond)

	id := fmt.Sprintf("%s-%s", in.Name, e.stamp)
	// The state sampler needs the job id before the workflow reports it:
	// RunExperiment derives it from the workflow id.
	states := startStateSampler(o.RunDir, workflows.JobIDFor(id), row.Operator, tasks, e.nats, time.Second)
	run, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		sampler.stop()
		states.stop()
		s.Reason = fmt.Sprintf("start workflow %s: %v", id, err)
		fmt.Println(label, s.Reason)
		return s
	}
	s.WorkflowID = run.GetID()
	fmt.Printf("%s started %s: %s at %d ev/s for %d s, %d task worker processes %v, producers on %v %v\n", label, id, in.QueryName, s.Rate, s.RuntimeSec, len(pids), pids, in.ProducerWorkers, s.ProducerPIDs)
	limit := runner.RunLimit(in, o.Margin)
	prof := startSteadyProfile(ctx, o, e.tc, run, row.Name, in.TotalRuntimeSeconds) // --profile (profile.go)
	res, err := runner.Follow(ctx, run, label, in.TotalRuntimeSeconds, limit)
	samples := sampler.stop()
	stateSamples := states.stop()
	prof.wait()
	if err != nil {
		if runner.Stopping(ctx, err) {
			_ = runner.Stop(e.tc, run, "koala bench: "+err.Error())
		}
		s.Reason = err.Error()
		fmt.Println(label, "failed:", s.Reason)
		return s
	}
	runner.WriteRawResult(o.ResultsDir, "steady-"+row.Name, res)
	s.JobID, s.Produced, s.Lost, s.Duplicated = res.JobID, res.Produced, res.Lost, res.Duplicated
	s.ExactnessUnchecked = res.ExactnessUnchecked
	if s.ExactnessUnchecked == "" {
		s.E2E = MergeSinkLatency(res.Sink.Latency)
	}
	if in.TotalRuntimeSeconds > 0 {
		s.ProducedPerSec = float64(res.Produced) / float64(in.TotalRuntimeSeconds)
	}
	runner.Sleep(ctx, o.FlushWait)

	jobStart, err := e.ch.JobStart(ctx, res.JobID)
	if err != nil {
		s.Reason = "job start: " + err.Error()
		return s
	}
	sink := runner.SinkOperator(res)
	if row.CountAt != "" {
		// An aggregation's sink receives results, not events: count the
		// events where they enter the aggregation instead.
		sink = row.CountAt
	}
	s.CountedAt = sink
	var sin SteadyInputs
	var errs []string
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, what+": "+err.Error())
		}
	}
	sin.Sink, err = e.ch.Throughput(ctx, res.JobID, sink)
	note("sink", err)
	sin.Lag, err = e.ch.Lag(ctx, res.JobID)
	note("lag", err)
	sin.Batches, err = e.ch.BatchHists(ctx, res.JobID, row.Operator)
	note("batch-time histograms", err)
	if len(errs) > 0 {
		s.Reason = strings.Join(errs, "; ")
		return s
	}
	// Window: after the warm-up, until the producer stopped (minus one second
	// for the last partial second), on the job's metric axis.
	offset := 0.0
	if !res.StartedAt.IsZero() {
		offset = res.StartedAt.Sub(jobStart).Seconds()
	}
	// Pipeline CPU: only the workers the run placed tasks on (a co-located
	// job may leave a worker of the list idle).
	keep, hosting := hostingWorkers(tasks, res.Final)
	if len(hosting) > 0 && len(hosting) < len(tasks) {
		samples = sampler.only(keep)
		s.WorkerPIDs = pidsOf(hosting)
	}
	s.TaskWorkers = workerNames(tasks)
	if len(hosting) > 0 {
		s.TaskWorkers = workerNames(hosting)
	}
	sin.JobStart, sin.CPU, sin.TargetRate, sin.State = jobStart, samples, s.Rate, stateSamples
	sin.From = float64(int(offset + experiments.CompareWarmupSec + 2)) // whole seconds
	sin.To = float64(int(offset + float64(in.TotalRuntimeSeconds) - 1))
	s = ComputeSteady(s, sin)
	s.Status = experiments.StatusOK
	if s.CPUSeconds <= 0 {
		s.Reason = "no CPU samples over the window"
	}
	fmt.Printf("%s produced %.0f ev/s, %.0f ev/s at %s (%.0f %% of %d), %.1f worker CPU-s over %.0f s = %.2f cores (machine busy %.2f cores) → %.0f ev/s per CPU-s; producers %.2f cores; lag %s; state %s; batch p50 %.2f ms p99 %.2f ms (HDR, %d batches); e2e p50/p99/p999/max %s; lost=%d dup=%d\n",
		label, s.ProducedPerSec, s.EventsPerSec, s.CountedAt, 100*s.SustainedRatio, s.Rate, s.CPUSeconds, s.WindowTo-s.WindowFrom, s.CoresUsed, s.MachineCores, s.EventsPerCPUSec, s.ProducerCores,
		s.lagText(), s.stateText(), s.BatchP50Us/1000, s.BatchP99Us/1000, s.BatchCount, s.E2EText(), s.Lost, s.Duplicated)
	return s
}

// fetchSizes are the source's fetch sizes a job with params gets: its
// SourceFetchMinBytes and SourceFetchMaxWaitMs, or the defaults.
func fetchSizes(params map[string]string) (minBytes, maxWaitMs int, err error) {
	minBytes, maxWaitMs = kafkaio.DefaultSourceFetchMinBytes, kafkaio.DefaultSourceFetchMaxWaitMs
	for name, dst := range map[string]*int{control.ParamSourceFetchMinBytes: &minBytes, control.ParamSourceFetchMaxWaitMs: &maxWaitMs} {
		if v, ok := params[name]; ok && v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return 0, 0, fmt.Errorf("%s %q: want a positive whole number", name, v)
			}
			*dst = n
		}
	}
	return minBytes, maxWaitMs, nil
}

// placeProducers decides where a steady run's input generators run. The
// original artifact generates input on separate producer machines; here a
// worker that hosts no task stands in for them, so the pipeline's CPU is
// that of the task workers alone. A config naming ProducerWorkers is kept;
// one naming neither those nor Workers gets the stack's last worker as its
// producer worker when the others still hold MinWorkers. Otherwise the
// producers share the task workers (and their CPU is counted with them).
// It returns the task workers' and the producer workers' processes.
func placeProducers(in *workflows.ExperimentInput, ws []workerFile) (tasks, producers []workerFile) {
	if len(in.ProducerWorkers) == 0 && len(in.Workers) == 0 && len(ws)-1 >= max(in.MinWorkers, 1) {
		in.ProducerWorkers = []string{ws[len(ws)-1].name}
	}
	for _, w := range ws {
		switch {
		case slices.Contains(in.ProducerWorkers, w.name):
			producers = append(producers, w)
		case len(in.Workers) == 0 || slices.Contains(in.Workers, w.name):
			tasks = append(tasks, w)
		}
	}
	return tasks, producers
}

func pidsOf(ws []workerFile) []int {
	out := make([]int, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.pid)
	}
	return out
}

func workerNames(ws []workerFile) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.name)
	}
	return out
}

// hostingWorkers marks which of ws host a task of dep.
func hostingWorkers(ws []workerFile, dep control.Deployment) (keep []bool, hosting []workerFile) {
	keep = make([]bool, len(ws))
	for i, w := range ws {
		keep[i] = slices.ContainsFunc(dep.Tasks, func(t control.TaskRef) bool { return t.WorkerID == w.name })
		if keep[i] {
			hosting = append(hosting, w)
		}
	}
	return keep, hosting
}
