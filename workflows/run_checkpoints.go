package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
)

// versionCheckpoints marks RunExperiment runs with CheckpointIntervalSeconds
// > 0: periodic checkpoints and recovery from a lost worker. Runs without
// an interval never reach the marker, so their histories are unchanged.
const versionCheckpoints = "checkpoints"

// checkpointer takes a job's periodic checkpoints as CheckpointJob child
// workflows and recovers the job from the latest one when a worker is lost.
//
// Rule with reconfigurations: a checkpoint is not started while a
// reconfiguration runs (busy) — since the "checkpoints-mid-migration"
// marker, only until its routes are swapped, after which checkpoints are
// of its new deployment (run_checkpoints_migration.go) — and a
// reconfiguration does not start while a checkpoint runs
// (reconfigScheduler.hold); a tick that finds the job busy is skipped. A
// fetch-on-demand scale-out's workflow ends once routes are swapped, and
// an eventual one's is past its swap, so checkpoints resume while keys
// are still to fetch: parts then carry the lookup tables and restore
// resolves them, and tasks refuse their part only during a migration's
// short steps (the rule in dataplane/checkpoint_barrier.go), so a
// checkpoint never captures a half-moved key.
type checkpointer struct {
	jobID    string
	interval time.Duration
	timeout  float64
	store    string
	// current is the deployment to checkpoint and whether a
	// reconfiguration is running.
	current func() (control.Deployment, bool)
	// onRecovered, when set, is called after each recovery.
	onRecovered func()
	// resume, when set, runs the recovered job until the end of the input
	// (reconfigurations included, run_recovery_reconfigs.go) and returns
	// its deployment then; unset, the run only waits for the end.
	resume func(ctx workflow.Context, dep control.Deployment, workers []control.WorkerInfo) (control.Deployment, error)

	seq       int
	running   bool
	stopped   bool
	completed []CheckpointJobResult
	failed    int
	skipped   int
	recovered []RecoveryOutcome
}

// RecoveryOutcome is one recovery of a run from a lost worker.
type RecoveryOutcome struct {
	Lost         string   `json:"lost"`
	CheckpointID string   `json:"checkpoint_id"`
	Moved        []string `json:"moved"`
	AtSec        float64  `json:"at_sec"` // since the job started
	Millis       float64  `json:"millis"`
}

// CheckpointSummary is what a run reports of its checkpoints.
type CheckpointSummary struct {
	Completed  int               `json:"completed"`
	Failed     int               `json:"failed"`
	Skipped    int               `json:"skipped"` // ticks while a reconfiguration ran
	Last       string            `json:"last,omitempty"`
	Recoveries []RecoveryOutcome `json:"recoveries,omitempty"`
	// Mean duration, size and longest alignment of the completed ones.
	MeanMillis      float64 `json:"mean_millis"`
	MeanBytes       float64 `json:"mean_bytes"`
	MaxAlignMillis  float64 `json:"max_align_millis"`
	IntervalSeconds int     `json:"interval_seconds"`
}

func newCheckpointer(in ExperimentInput, job control.JobSpec) *checkpointer {
	return &checkpointer{
		jobID: job.JobID, interval: time.Duration(in.CheckpointIntervalSeconds) * time.Second,
		timeout: max(30, float64(in.CheckpointIntervalSeconds)*3), store: job.Params[control.ParamCheckpointStore],
	}
}

// start takes a checkpoint every interval until ctx ends or stop.
func (c *checkpointer) start(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		for !c.stopped {
			if err := workflow.Sleep(ctx, c.interval); err != nil || c.stopped {
				return
			}
			dep, busy := c.current()
			if busy {
				c.skipped++
				continue
			}
			c.seq++
			c.running = true
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: fmt.Sprintf("%s-%s", c.jobID, checkpoint.ID(c.seq))})
			var res CheckpointJobResult
			err := workflow.ExecuteChildWorkflow(cctx, CheckpointJob, CheckpointJobInput{Deployment: dep, Seq: c.seq, TimeoutSecs: c.timeout}).Get(ctx, &res)
			c.running = false
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				c.failed++
				workflow.GetLogger(ctx).Warn("checkpoint failed; the job goes on", "checkpoint", checkpoint.ID(c.seq), "error", err)
				continue
			}
			c.completed = append(c.completed, res)
		}
	})
}

// stop ends the periodic checkpoints (the input has ended) once the
// running one, if any, is done.
func (c *checkpointer) stop(ctx workflow.Context) error {
	c.stopped = true
	return workflow.Await(ctx, func() bool { return !c.running })
}

func (c *checkpointer) summary(in ExperimentInput) CheckpointSummary {
	s := CheckpointSummary{Completed: len(c.completed), Failed: c.failed, Skipped: c.skipped, Recoveries: c.recovered, IntervalSeconds: in.CheckpointIntervalSeconds}
	for _, r := range c.completed {
		s.Last = r.CheckpointID
		s.MeanMillis += r.DurationMillis / float64(len(c.completed))
		s.MeanBytes += float64(r.Bytes) / float64(len(c.completed))
		s.MaxAlignMillis = max(s.MaxAlignMillis, r.MaxAlignMillis)
	}
	return s
}

// recoverLoss is called when the run's main phase failed with cause. If a
// worker was lost (the watch explains cause) and a checkpoint completed,
// it recovers the job on the surviving workers (RecoverJob), watches them
// anew, resumes the periodic checkpoints and waits until endAt, recovering
// again if another worker is lost. It returns the new run context, the
// deployment at the end and the surviving workers; otherwise cause.
// Reconfigurations go on after a recovery only with resume set.
func (c *checkpointer) recoverLoss(root workflow.Context, watch **workerWatch, cause error, workers []control.WorkerInfo, start, endAt time.Time) (workflow.Context, control.Deployment, []control.WorkerInfo, error) {
	for {
		w := *watch
		lost := w.explain(cause)
		if lost == nil || len(c.completed) == 0 {
			return nil, control.Deployment{}, workers, cause
		}
		var detail activities.WorkerLost
		_ = lost.Details(&detail)
		w.stopWatch()
		began := workflow.Now(root)
		if err := workflow.Await(root, func() bool { return !c.running }); err != nil {
			return nil, control.Deployment{}, workers, err
		}
		cctx := workflow.WithChildOptions(root, workflow.ChildWorkflowOptions{WorkflowID: fmt.Sprintf("%s-recover-%d", c.jobID, len(c.recovered)+1)})
		var rec RecoverJobResult
		if err := workflow.ExecuteChildWorkflow(cctx, RecoverJob, RecoverJobInput{
			JobID: c.jobID, Store: c.store, Workers: workers, Lost: []string{detail.WorkerID},
		}).Get(root, &rec); err != nil {
			return nil, control.Deployment{}, workers, fmt.Errorf("%s; recovery failed: %w", lost.Message(), err)
		}
		var survivors []control.WorkerInfo
		for _, wi := range workers {
			if wi.ID != detail.WorkerID {
				survivors = append(survivors, wi)
			}
		}
		workers = survivors
		c.recovered = append(c.recovered, RecoveryOutcome{
			Lost: detail.WorkerID, CheckpointID: rec.CheckpointID, Moved: rec.Moved,
			AtSec: began.Sub(start).Seconds(), Millis: float64(workflow.Now(root).Sub(began)) / float64(time.Millisecond),
		})
		if c.onRecovered != nil {
			c.onRecovered()
		}
		runCtx, nw := startWorkerWatch(root, c.jobID, workers, endAt.Sub(workflow.Now(root))+2*time.Minute)
		*watch = nw
		dep := rec.Deployment
		if c.resume == nil {
			c.current = func() (control.Deployment, bool) { return dep, false }
		}
		c.start(runCtx)
		cause = nil
		if c.resume != nil {
			dep, cause = c.resume(runCtx, dep, workers)
		} else if d := endAt.Sub(workflow.Now(runCtx)); d > 0 {
			cause = workflow.Sleep(runCtx, d)
		}
		if cause == nil {
			return runCtx, dep, workers, nil
		}
	}
}
