package workflows

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/statesvc"
	"koala/workflows/plan"
)

// ExperimentResult is what RunExperiment returns: exactness counts from the
// sink ledgers, the reconfigurations with their step timings, and the
// throughput series read back from ClickHouse.
type ExperimentResult struct {
	JobID         string                `json:"job_id"`
	Topic         string                `json:"topic"`
	StartedAt     time.Time             `json:"started_at"`
	Produced      int64                 `json:"produced"`
	ProduceFailed int64                 `json:"produce_failed"`
	Sink          activities.SinkCounts `json:"sink"`
	Lost          int64                 `json:"lost"`
	Duplicated    int64                 `json:"duplicated"`
	// ExactnessUnchecked is set, with the reason, when the sink ledger cannot
	// check the query (it filters, joins or aggregates); Lost and Duplicated
	// are then 0 and mean nothing.
	ExactnessUnchecked string `json:"exactness_unchecked,omitempty"`
	// Reordered counts records that reached the sink after a later record
	// of their key; OrderUnchecked is set instead, with the reason, when the
	// sink ledger cannot check the query's per-key order.
	Reordered        int64                   `json:"reordered"`
	OrderUnchecked   string                  `json:"order_unchecked,omitempty"`
	Reconfigs        []ReconfigOutcome       `json:"reconfigs"`
	SinkThroughput   []metrics.Point         `json:"sink_throughput"`
	SourceThroughput []metrics.Point         `json:"source_throughput"`
	Events           []metrics.ReconfigEvent `json:"events,omitempty"`
	// MetricsStart is second 0 of the throughput series (zero: unknown, then
	// the series are taken to start at StartedAt).
	MetricsStart time.Time          `json:"metrics_start,omitempty"`
	Final        control.Deployment `json:"final"`
	// Checkpoints, with CheckpointIntervalSeconds > 0 (run_checkpoints.go).
	Checkpoints *CheckpointSummary `json:"checkpoints,omitempty"`
}

// ReconfigOutcome is one fired reconfiguration.
type ReconfigOutcome struct {
	ID         string       `json:"id"`
	WorkflowID string       `json:"workflow_id"`
	Spec       ReconfigSpec `json:"spec"`
	Protocol   string       `json:"protocol"`
	StartSec   float64      `json:"start_sec"` // since the job started
	EndSec     float64      `json:"end_sec"`
	Steps      []StepTiming `json:"steps"`
	// Moves is the keyed state the reconfiguration moved (ReconfigureResult.Moves).
	Moves []StateMove `json:"moves,omitempty"`
}

// RunExperiment deploys a job, feeds it from the producer, fires each
// reconfiguration on a durable timer as a child workflow, ends the input at
// TotalRuntimeSeconds, drains and reports exactness and throughput.
//
// Scheduling (runs since the "concurrent-reconfigs" version marker; see
// reconfigScheduler): with the lazy and DRRS protocols, reconfigurations
// of different operators whose trigger times overlap run as concurrent
// child workflows, each planned from the deployment when it starts and
// merged back per operator; two of the same operator queue, the second
// starting when the first completes (its StartSec shows the delay).
// Stop-and-restart pauses the whole job, so its reconfigurations all
// queue. While the input runs, the "reconfigure" update (UpdateReconfigure)
// adds a reconfiguration on request; one for an operator that is being
// reconfigured is rejected rather than queued.
//
// Runs recorded before the marker replay the earlier rule: every
// reconfiguration queued behind the previous one (runQueuedReconfigs).
//
// A worker lost during the run fails it (worker_watch.go), unless the run
// takes checkpoints (CheckpointIntervalSeconds > 0) and one completed: the
// job is then recovered from it and the run goes on (run_checkpoints.go),
// with its reconfigurations (run_recovery_reconfigs.go).
func RunExperiment(ctx workflow.Context, in ExperimentInput) (_ ExperimentResult, err error) {
	var res ExperimentResult
	if err := validateInput(in); err != nil {
		return res, err
	}
	jobID := JobIDFor(workflow.GetInfo(ctx).WorkflowExecution.ID)
	res.JobID = jobID
	actx := workflow.WithActivityOptions(ctx, stepOptions())
	var sched *reconfigScheduler // nil: a run recorded before concurrent reconfigurations
	if workflow.GetVersion(ctx, versionConcurrentReconfigs, workflow.DefaultVersion, 1) >= 1 {
		sched = newReconfigScheduler(ctx, in, jobID)
		if err := sched.registerReconfigureUpdate(ctx); err != nil {
			return res, err
		}
		if err := sched.registerJobStateQuery(ctx); err != nil { // run_experiment_state.go; a query adds no command
			return res, err
		}
	}

	workers, producerWorkers, err := discoverWorkers(ctx, actx, in) // producer_placement.go
	if err != nil {
		return res, err
	}
	root := ctx
	var watch *workerWatch
	if workflow.GetVersion(ctx, "worker-watch", workflow.DefaultVersion, 1) == 1 {
		ctx, watch = startWorkerWatch(ctx, jobID, workers, time.Duration(in.TotalRuntimeSeconds+max(in.DrainTimeoutSeconds, 120))*time.Second)
		actx = workflow.WithActivityOptions(ctx, stepOptions())
		if sched != nil {
			sched.ctx = ctx // its children are cancelled with the run
		}
		defer func() { err = watch.finish(err) }() // watch is replaced after a recovery
	}
	checkpoints := in.CheckpointIntervalSeconds > 0 && sched != nil && watch != nil &&
		workflow.GetVersion(ctx, versionCheckpoints, workflow.DefaultVersion, 1) == 1
	var job control.JobSpec
	if err := workflow.ExecuteActivity(actx, a.BuildJob, activities.JobInput{
		JobID: jobID, Experiment: in.Name, Query: in.QueryName, Parallelism: in.Parallelism,
		NumBuckets: in.NumBuckets, BatchSize: in.BatchSize, Partitions: in.Partitions,
		KafkaBrokers: in.KafkaBrokers, StateBackend: in.StateBackend, Params: in.Params, Checkpoints: checkpoints,
	}).Get(ctx, &job); err != nil {
		return res, err
	}
	res.Topic = job.Topic
	dep, err := plan.Initial(job, workers)
	if err != nil {
		return res, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidDeployment", err)
	}
	if err := workflow.ExecuteActivity(actx, a.CreateTopic, job).Get(ctx, nil); err != nil {
		return res, err
	}
	if err := workflow.ExecuteActivity(actx, a.DeployTasks, activities.TasksInput{Deployment: dep}).Get(ctx, nil); err != nil {
		return res, err
	}
	// Producers started and not yet stopped: a failed or canceled run
	// stops them in cleanup.
	var running []activities.ProducerInput
	wu, snap, err := warmUpStart(ctx, in, dep) // warmup.go: load warm-up state before the tasks start
	if err != nil {
		return res, cleanup(ctx, dep, err, running...)
	}
	if err := workflow.ExecuteActivity(actx, a.StartTasks, activities.TasksInput{Deployment: dep}).Get(ctx, nil); err != nil {
		return res, cleanup(ctx, dep, err, running...)
	}
	producers := warmUpProducers(in, wu, snap, producerInputs(in, job, producerWorkers))
	for _, p := range producers {
		if err := workflow.ExecuteActivity(actx, a.StartProducer, p).Get(ctx, nil); err != nil {
			return res, cleanup(ctx, dep, err, running...)
		}
		running = append(running, p)
	}
	start := workflow.Now(ctx)
	res.StartedAt = start

	switch {
	case wu.save:
		// A warm-up run has no reconfigurations (warmUpOf); its input ends
		// once every record reached the sink (warmup.go).
		if err := warmUpInputEnd(ctx, wu, dep, start, in); err != nil {
			return res, cleanup(ctx, dep, err, running...)
		}
	case sched != nil:
		sched.goLive(dep, workers, start)
		startAutoscaler(ctx, in) // autoscale_child.go; only with an Autoscaler policy
		var ckpt *checkpointer
		if checkpoints {
			ckpt = newCheckpointer(in, job)
			ckpt.current = func() (control.Deployment, bool) { return sched.dep, len(sched.running) > 0 }
			if workflow.GetVersion(ctx, versionCheckpointsMidMigration, workflow.DefaultVersion, 1) == 1 {
				sched.trackRoutesSwapped(ctx) // run_checkpoints_migration.go
				ckpt.current = func() (control.Deployment, bool) {
					dep, ok := sched.checkpointable()
					return dep, !ok
				}
			}
			sched.hold = func() bool { return ckpt.running }
			// From a lost worker's report until the recovery is done
			// (recoverLoss replaces watch), requests are refused.
			sched.lostWorker = func() (string, bool) {
				lost := lostWorker(watch.lost)
				if lost == nil || len(ckpt.completed) == 0 {
					return "", false
				}
				var detail activities.WorkerLost
				_ = lost.Details(&detail)
				return detail.WorkerID, true
			}
			ckpt.start(ctx)
		}
		sched.runTimeline(in.Reconfigurations)
		err := sched.finish(ctx, in.TotalRuntimeSeconds)
		res.Reconfigs, dep = sched.outcomes, sched.dep
		if err != nil && ckpt != nil {
			var rctx workflow.Context
			endAt := start.Add(time.Duration(in.TotalRuntimeSeconds) * time.Second)
			if workflow.GetVersion(root, versionReconfigsAfterRecovery, workflow.DefaultVersion, 1) == 1 {
				// Interrupted and later reconfigurations run on the
				// recovered deployment (run_recovery_reconfigs.go).
				ckpt.resume = func(rctx workflow.Context, dep control.Deployment, workers []control.WorkerInfo) (control.Deployment, error) {
					sched.resumeAfterRecovery(rctx, dep, workers)
					err := sched.finish(rctx, in.TotalRuntimeSeconds)
					return sched.dep, err
				}
			} else {
				// Reconfigurations (timeline and requests) do not run after a recovery.
				ckpt.onRecovered = func() { sched.closed, sched.abandoned = true, true }
			}
			if rctx, dep, workers, err = ckpt.recoverLoss(root, &watch, err, workers, start, endAt); err == nil {
				ctx, actx = rctx, workflow.WithActivityOptions(rctx, stepOptions())
			} else {
				sched.abandoned = true // requests waiting for a recovery fail with their error
			}
			res.Reconfigs = sched.outcomes
		}
		if ckpt != nil {
			summary := ckpt.summary(in)
			res.Checkpoints = &summary
		}
		if err != nil {
			return res, cleanup(ctx, dep, err, running...)
		}
		if ckpt != nil {
			if err := ckpt.stop(ctx); err != nil {
				return res, cleanup(ctx, dep, err, running...)
			}
			summary := ckpt.summary(in)
			res.Checkpoints = &summary
		}
	default:
		if dep, err = runQueuedReconfigs(ctx, in, jobID, workers, dep, start, &res); err != nil {
			return res, err
		}
	}
	for _, p := range producers {
		var rep control.ProduceReport
		if err := workflow.ExecuteActivity(actx, a.StopProducer, p).Get(ctx, &rep); err != nil {
			return res, cleanup(ctx, dep, err, running...)
		}
		running = running[1:]
		res.Produced += rep.Acked
		res.ProduceFailed += rep.Failed
	}
	var ends map[int32]int64
	if err := workflow.ExecuteActivity(actx, a.EndOffsets, job).Get(ctx, &ends); err != nil {
		return res, cleanup(ctx, dep, err, running...)
	}
	drainTimeout := float64(in.DrainTimeoutSeconds)
	if drainTimeout <= 0 {
		drainTimeout = 120
	}
	if err := workflow.ExecuteActivity(actx, a.FinishAndDrain, activities.DrainInput{
		Deployment: dep, BarrierID: jobID + "-eos", EndOffsets: ends, TimeoutSecs: drainTimeout,
	}).Get(ctx, nil); err != nil {
		return res, cleanup(ctx, dep, err, running...)
	}
	if err := workflow.ExecuteActivity(actx, a.CollectSinkCounts, dep).Get(ctx, &res.Sink); err != nil {
		return res, cleanup(ctx, dep, err, running...)
	}
	if job.ExactnessUnchecked == "" {
		res.Lost = res.Produced - int64(res.Sink.Distinct)
		res.Duplicated = int64(res.Sink.Duplicates)
	} else {
		res.ExactnessUnchecked = job.ExactnessUnchecked
	}
	switch {
	case res.Sink.OrderChecked:
		res.Reordered = int64(res.Sink.Reordered)
	case job.OrderUnchecked != "":
		res.OrderUnchecked = job.OrderUnchecked
	default:
		res.OrderUnchecked = "the sinks did not check order (workers from before the order ledger)"
	}
	res.Final = dep
	if err := warmUpEnd(ctx, in, wu, dep, res.Produced); err != nil { // warmup.go: snapshot a warm-up's state
		return res, cleanup(ctx, dep, err, running...)
	}
	if err := workflow.ExecuteActivity(actx, a.StopTasks, activities.TasksInput{Deployment: dep}).Get(ctx, nil); err != nil {
		return res, err
	}
	dropRemoteState(ctx, job)
	// Metrics are best effort: a missing ClickHouse must not fail a run whose
	// exactness was already established.
	sink, source := lastOperator(job), job.Operators[0].Name
	_ = workflow.ExecuteActivity(actx, a.Throughput, activities.SeriesInput{JobID: jobID, Operator: sink}).Get(ctx, &res.SinkThroughput)
	_ = workflow.ExecuteActivity(actx, a.Throughput, activities.SeriesInput{JobID: jobID, Operator: source}).Get(ctx, &res.SourceThroughput)
	_ = workflow.ExecuteActivity(actx, a.ReconfigEvents, jobID).Get(ctx, &res.Events)
	if workflow.GetVersion(ctx, "metrics-start", workflow.DefaultVersion, 1) == 1 {
		_ = workflow.ExecuteActivity(actx, a.MetricsStart, jobID).Get(ctx, &res.MetricsStart)
	}
	return res, nil
}

// runQueuedReconfigs is the scheduling of runs recorded before the
// "concurrent-reconfigs" marker: one reconfiguration at a time in trigger
// order (ties: config order), each planned from the deployment the
// previous one left, then the wait for the end of the input.
func runQueuedReconfigs(ctx workflow.Context, in ExperimentInput, jobID string, workers []control.WorkerInfo, dep control.Deployment, start time.Time, res *ExperimentResult) (control.Deployment, error) {
	reconfigs := append([]ReconfigSpec(nil), in.Reconfigurations...)
	sort.SliceStable(reconfigs, func(i, j int) bool { return reconfigs[i].TriggerTimeSeconds < reconfigs[j].TriggerTimeSeconds })
	for i, spec := range reconfigs {
		if err := sleepUntil(ctx, start, spec.TriggerTimeSeconds); err != nil {
			return dep, err
		}
		id := fmt.Sprintf("%s-reconfig-%d", jobID, i+1)
		child, err := childFor(in.ReconfigProtocol)
		if err != nil {
			return dep, cleanup(ctx, dep, err)
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id})
		began := workflow.Now(ctx)
		var out ReconfigureResult
		err = workflow.ExecuteChildWorkflow(cctx, child, ReconfigureInput{ReconfigID: id, Current: dep, Spec: spec, Workers: workers}).Get(ctx, &out)
		res.Reconfigs = append(res.Reconfigs, ReconfigOutcome{
			ID: id, WorkflowID: id, Spec: spec, Protocol: in.ReconfigProtocol,
			StartSec: began.Sub(start).Seconds(), EndSec: workflow.Now(ctx).Sub(start).Seconds(), Steps: out.Steps, Moves: out.Moves,
		})
		showMoves(ctx, res.Reconfigs)
		if err != nil {
			return dep, cleanup(ctx, dep, err)
		}
		dep = out.Deployment
	}
	return dep, sleepUntil(ctx, start, in.TotalRuntimeSeconds)
}

func childFor(protocol string) (any, error) {
	switch protocol {
	case ProtocolStopAndRestart, "":
		return ReconfigureStopAndRestart, nil
	case ProtocolLazy:
		return ReconfigureLazy, nil
	case ProtocolDRRS:
		return ReconfigureDRRS, nil
	}
	err := fmt.Errorf("ReconfigProtocol %q is not implemented yet (implemented: %s, %s, %s)", protocol, ProtocolLazy, ProtocolStopAndRestart, ProtocolDRRS)
	return nil, temporal.NewNonRetryableApplicationError(err.Error(), "BadConfig", err)
}

func sleepUntil(ctx workflow.Context, start time.Time, sec int) error {
	d := start.Add(time.Duration(sec) * time.Second).Sub(workflow.Now(ctx))
	if d <= 0 {
		return nil
	}
	return workflow.Sleep(ctx, d)
}

// cleanup stops the producer-fed job after a failure or a cancel so no
// task keeps running for a run that has ended, and the producers it
// started and has not stopped (a canceled run's kept writing to Kafka
// beside the next run); the original error is returned.
func cleanup(ctx workflow.Context, dep control.Deployment, cause error, producers ...activities.ProducerInput) error {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	dctx = workflow.WithActivityOptions(dctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})
	if len(producers) > 0 && workflow.GetVersion(dctx, "cleanup-stops-producers", workflow.DefaultVersion, 1) >= 1 {
		for _, p := range producers {
			_ = workflow.ExecuteActivity(dctx, a.StopProducer, p).Get(dctx, nil)
		}
	}
	_ = workflow.ExecuteActivity(dctx, a.StopTasks, activities.TasksInput{Deployment: dep}).Get(dctx, nil)
	dropRemoteState(dctx, dep.Job)
	return cause
}

// dropRemoteState deletes a remote-pebble job's keyed state from the state
// service once its tasks stopped, so a long-running service does not keep
// every finished job's state (jobs never read each other's: it is
// namespaced by job id). Best effort: the run's results do not depend on
// it. Added behind a version marker, only for remote-pebble jobs (whose
// backend comes from history): earlier runs replay unchanged.
func dropRemoteState(ctx workflow.Context, job control.JobSpec) {
	if job.StateBackend != statesvc.BackendRemotePebble {
		return
	}
	if workflow.GetVersion(ctx, "drop-remote-state", workflow.DefaultVersion, 1) < 1 {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
	_ = workflow.ExecuteActivity(actx, a.DropRemoteState, job).Get(ctx, nil)
}

// producerInputs splits the input among in.Producer.Producers generators,
// producer i on workers[i mod len(workers)].
func producerInputs(in ExperimentInput, job control.JobSpec, workers []control.WorkerInfo) []activities.ProducerInput {
	// A RateLimiterConfig schedule (checked by validateInput) limits each
	// producer, as in the artifact; RatePerSec is split among them.
	sched, _ := produce.ParseRateLimiterConfig([]byte(in.Params["RateLimiterConfig"]))
	shares := produce.SplitProduce(control.ProduceRequest{
		Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, Generator: in.Producer.Generator,
		RatePerSec: in.Producer.RatePerSec, NumKeys: in.Producer.NumKeys, Seed: in.Producer.Seed, ValueSize: in.Producer.ValueSize,
		Skew: in.Producer.Skew, Sequential: in.Producer.Sequential, MaxEvents: in.Producer.MaxEvents, Nexmark: in.Producer.Nexmark,
		RateLimit: sched.RateLimit, RateChangeInterval: sched.RateChangeInterval,
		FilePath: filePaths(in.Params["FilePath"]),
	}, in.Producer.Producers)
	out := make([]activities.ProducerInput, len(shares))
	for i, req := range shares {
		out[i] = activities.ProducerInput{JobID: job.JobID, WorkerID: workers[i%len(workers)].ID, Request: req}
	}
	return out
}

// filePaths splits the comma-joined "FilePath" knob (see experiments'
// knob table) into the trace files a trace generator replays.
func filePaths(joined string) []string {
	if joined == "" {
		return nil
	}
	return strings.Split(joined, ",")
}

func lastOperator(job control.JobSpec) string {
	return job.Operators[len(job.Operators)-1].Name
}

// JobIDFor turns a workflow id into a job id that is safe in Kafka topic
// names and NATS subjects.
func JobIDFor(workflowID string) string {
	var b strings.Builder
	for _, r := range workflowID {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

func validateInput(in ExperimentInput) error {
	var problems []string
	if in.QueryName == "" {
		problems = append(problems, "QueryName is required")
	}
	switch in.ReconfigProtocol {
	case "", ProtocolLazy, ProtocolStopAndRestart, ProtocolDRRS:
	default:
		problems = append(problems, fmt.Sprintf("ReconfigProtocol %q is unknown (allowed: %s, %s, %s)", in.ReconfigProtocol, ProtocolLazy, ProtocolStopAndRestart, ProtocolDRRS))
	}
	if in.TotalRuntimeSeconds <= 0 {
		problems = append(problems, fmt.Sprintf("TotalRuntimeSeconds %d must be > 0", in.TotalRuntimeSeconds))
	}
	if len(in.KafkaBrokers) == 0 {
		problems = append(problems, "KafkaBrokers must name at least one broker")
	}
	if rc := in.Params["RateLimiterConfig"]; rc != "" {
		if _, err := produce.ParseRateLimiterConfig([]byte(rc)); err != nil {
			problems = append(problems, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	// Checked here, not when a stop-and-restart first copies state: by
	// then the job would be running with a size it cannot use.
	if _, err := control.StateMigrationChunkSize(control.JobSpec{Params: in.Params}); err != nil {
		problems = append(problems, err.Error())
	}
	for i, r := range in.Reconfigurations {
		switch r.Type {
		case plan.KindRebalance:
			// Without BucketLoad the plan step measures the load.
		case plan.KindTaskMigration:
			// A missing TaskID or TargetWorker is chosen when the
			// migration starts (task_migration_choice.go).
			if r.TaskID == "" && r.TargetOperator == "" {
				problems = append(problems, fmt.Sprintf("Reconfigurations[%d]: task-migration needs TargetOperator (its task and worker are then chosen) or TaskID", i))
			}
		default:
			if r.TargetParallelism <= 0 {
				problems = append(problems, fmt.Sprintf("Reconfigurations[%d].TargetParrallelism %d must be ≥ 1", i, r.TargetParallelism))
			}
		}
		if r.TriggerTimeSeconds < 0 || r.TriggerTimeSeconds >= in.TotalRuntimeSeconds {
			problems = append(problems, fmt.Sprintf("Reconfigurations[%d].TriggerTimeSeconds %d must be in [0, TotalRuntimeSeconds=%d)", i, r.TriggerTimeSeconds, in.TotalRuntimeSeconds))
		}
	}
	problems = append(problems, autoscalerProblems(in)...) // autoscale_child.go
	if len(problems) > 0 {
		msg := "invalid experiment: " + strings.Join(problems, "; ")
		return temporal.NewNonRetryableApplicationError(msg, "BadConfig", nil)
	}
	return nil
}
