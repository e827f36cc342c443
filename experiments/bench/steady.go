package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/experiments/runner"
	"koala/workflows"

	"go.temporal.io/sdk/client"
)

// benchSteady runs one query without reconfiguration and measures it.
func benchSteady(ctx context.Context, o Options, tc client.Client, ch *metrics.ClickHouse, cfg, op, countAt string, rate int, target float64, stamp string) Steady {
	s := Steady{Operator: op, Target: target, Status: experiments.StatusFailed}
	in, err := experiments.LoadConfig(cfg)
	if err != nil {
		s.Reason = err.Error()
		fmt.Println("steady:", s.Reason)
		return s
	}
	runner.DefaultBrokers(&in, o.Kafka)
	if rate > 0 {
		in.Producer.RatePerSec = rate
	}
	if o.SteadySec > 0 {
		in.TotalRuntimeSeconds = o.SteadySec
	}
	in.Reconfigurations = nil
	s.Query, s.Backend, s.Rate, s.RuntimeSec = in.QueryName, in.StateBackend, in.Producer.RatePerSec, in.TotalRuntimeSeconds
	label := "[steady " + in.QueryName + "]"
	if ch == nil {
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

	id := fmt.Sprintf("%s-%s", in.Name, stamp)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		sampler.stop()
		s.Reason = fmt.Sprintf("start workflow %s: %v", id, err)
		fmt.Println(label, s.Reason)
		return s
	}
	s.WorkflowID = run.GetID()
	fmt.Printf("%s started %s: %s at %d ev/s for %d s, %d task worker processes %v, producers on %v %v\n", label, id, in.QueryName, s.Rate, s.RuntimeSec, len(pids), pids, in.ProducerWorkers, s.ProducerPIDs)
	limit := runner.RunLimit(in, o.Margin)
	prof := startSteadyProfile(ctx, o, tc, run, in.QueryName, in.TotalRuntimeSeconds) // --profile (profile.go)
	res, err := runner.Follow(ctx, run, label, in.TotalRuntimeSeconds, limit)
	samples := sampler.stop()
	prof.wait()
	if err != nil {
		if errors.Is(err, runner.ErrGaveUp) {
			_ = runner.Terminate(tc, run, "koala bench: run exceeded its time limit")
		}
		s.Reason = err.Error()
		fmt.Println(label, "failed:", s.Reason)
		return s
	}
	runner.WriteRawResult(o.ResultsDir, "steady-"+in.QueryName, res)
	s.JobID, s.Produced, s.Lost, s.Duplicated = res.JobID, res.Produced, res.Lost, res.Duplicated
	s.ExactnessUnchecked = res.ExactnessUnchecked
	if s.ExactnessUnchecked == "" {
		s.E2E = MergeSinkLatency(res.Sink.Latency)
	}
	if in.TotalRuntimeSeconds > 0 {
		s.ProducedPerSec = float64(res.Produced) / float64(in.TotalRuntimeSeconds)
	}
	runner.Sleep(ctx, o.FlushWait)

	jobStart, err := ch.JobStart(ctx, res.JobID)
	if err != nil {
		s.Reason = "job start: " + err.Error()
		return s
	}
	sink := runner.SinkOperator(res)
	if countAt != "" {
		// An aggregation's sink receives results, not events: count the
		// events where they enter the aggregation instead.
		sink = countAt
	}
	s.CountedAt = sink
	var sin SteadyInputs
	var errs []string
	note := func(what string, err error) {
		if err != nil {
			errs = append(errs, what+": "+err.Error())
		}
	}
	sin.Sink, err = ch.Throughput(ctx, res.JobID, sink)
	note("sink", err)
	sin.Lag, err = ch.Lag(ctx, res.JobID)
	note("lag", err)
	sin.Batches, err = ch.BatchHists(ctx, res.JobID, op)
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
	sin.JobStart, sin.CPU, sin.TargetRate = jobStart, samples, s.Rate
	sin.From = float64(int(offset + experiments.CompareWarmupSec + 2)) // whole seconds
	sin.To = float64(int(offset + float64(in.TotalRuntimeSeconds) - 1))
	s = ComputeSteady(s, sin)
	s.Status = experiments.StatusOK
	if s.CPUSeconds <= 0 {
		s.Reason = "no CPU samples over the window"
	}
	fmt.Printf("%s produced %.0f ev/s, %.0f ev/s at %s (%.0f %% of %d), %.1f worker CPU-s over %.0f s = %.2f cores (machine busy %.2f cores) → %.0f ev/s per CPU-s; producers %.2f cores; batch p50 %.2f ms p99 %.2f ms (HDR, %d batches); e2e p50/p99/p999/max %s; lost=%d dup=%d\n",
		label, s.ProducedPerSec, s.EventsPerSec, s.CountedAt, 100*s.SustainedRatio, s.Rate, s.CPUSeconds, s.WindowTo-s.WindowFrom, s.CoresUsed, s.MachineCores, s.EventsPerCPUSec, s.ProducerCores,
		s.BatchP50Us/1000, s.BatchP99Us/1000, s.BatchCount, s.E2EText(), s.Lost, s.Duplicated)
	return s
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
