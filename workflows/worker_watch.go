package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
)

// Worker loss. RunExperiment runs the WatchWorkers activity alongside its
// timers, activities and reconfiguration children for the whole run. When
// a worker stays silent for longer than activities.DefaultWorkerSilence the
// watch fails with a WorkerLost error and the run:
//
//  1. cancels whatever is in flight — a trigger timer, an activity, or a
//     reconfiguration child, whose own pending activities are cancelled in
//     turn and which runs no further step (a cancelled child does not
//     compensate);
//  2. stops every task of the job on every surviving worker (StopJob), not
//     only those of the last known deployment, and checks that none is
//     left;
//  3. fails with "worker w2 lost: no heartbeat for 10s" (type WorkerLost),
//     which the CLI summary shows as "failed: worker lost".
//
// The watch covers every worker the run discovered, not only those of the
// current deployment: a reconfiguration may place tasks on any of them.
//
// Routing after a lost worker is consistent in this sense: every task
// holds one whole deployment, the one before or the one after the
// reconfiguration that was cut short — a task installs a deployment
// atomically and ignores older epochs, so no task routes with a table
// mixing buckets of the two — and no task of the job runs any more once
// the workflow has failed, so no record is routed by a half-applied
// reconfiguration and no result of the run is reported.
//
// A step that talks to the dead worker may fail before the watch notices
// (retries give up after a few seconds, the watch waits for the full
// silence). A failure while the watch still runs is therefore held for up
// to the silence plus watchGrace: if the watch reports a lost worker in
// that time, the loss is the reason the run reports.

// watchGrace is how long past the allowed silence a failure waits for the
// watch to explain it.
const watchGrace = 5 * time.Second

// errTypesNotFromWorkers are failures no lost worker can explain: the run
// reports them at once.
var errTypesNotFromWorkers = []string{"BadConfig", "InvalidReconfiguration", "BadQuery", "InvalidDeployment"}

// workerWatch is the WatchWorkers activity of one run.
type workerWatch struct {
	root      workflow.Context // the workflow's own context, never cancelled by the watch
	jobID     string
	workers   []string
	silence   time.Duration
	future    workflow.Future
	stopWatch workflow.CancelFunc
	settled   bool  // the watch activity ended
	lost      error // the WorkerLost error, when it ended with one
}

// startWorkerWatch starts watching workers and returns the context the
// rest of the run must use: it is cancelled when a worker is lost.
// RunExperiment must hand its final error to finish.
func startWorkerWatch(ctx workflow.Context, jobID string, workers []control.WorkerInfo, runFor time.Duration) (workflow.Context, *workerWatch) {
	w := &workerWatch{root: ctx, jobID: jobID, silence: activities.DefaultWorkerSilence}
	for _, wi := range workers {
		w.workers = append(w.workers, wi.ID)
	}
	runCtx, cancelRun := workflow.WithCancel(ctx)
	watchCtx, stopWatch := workflow.WithCancel(ctx)
	w.stopWatch = stopWatch
	watchCtx = workflow.WithActivityOptions(watchCtx, workflow.ActivityOptions{
		// The whole run, drain and reporting included; it normally ends by
		// cancellation.
		StartToCloseTimeout: runFor + time.Hour,
		// A controller crash loses the watch; the retry on the restarted
		// controller starts with a fresh allowance for every worker.
		HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			MaximumInterval:        10 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrTypeWorkerLost, "BadConfig"},
		},
		Summary: "watch-workers",
	})
	w.future = workflow.ExecuteActivity(watchCtx, a.WatchWorkers, activities.WatchInput{
		JobID: jobID, Workers: w.workers, SilenceSecs: w.silence.Seconds(),
	})
	workflow.Go(ctx, func(gctx workflow.Context) {
		err := w.future.Get(gctx, nil)
		w.settle(err)
		if w.lost != nil {
			cancelRun()
		}
	})
	return runCtx, w
}

// settle records how the watch ended.
func (w *workerWatch) settle(err error) {
	w.settled = true
	if lostWorker(err) != nil {
		w.lost = err
	}
}

// lostWorker returns the WorkerLost error in err's chain, if any.
func lostWorker(err error) *temporal.ApplicationError {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTypeWorkerLost {
		return appErr
	}
	return nil
}

// explainable tells whether a lost worker could be the cause of err.
func explainable(err error) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		for _, t := range errTypesNotFromWorkers {
			if appErr.Type() == t {
				return false
			}
		}
	}
	return true
}

// explain waits, for a failure err while the watch still runs, up to the
// allowed silence plus watchGrace for the watch to report a lost worker,
// and returns the WorkerLost error if it did (nil: no worker was lost).
func (w *workerWatch) explain(err error) *temporal.ApplicationError {
	if w.lost == nil && !w.settled && explainable(err) && w.root.Err() == nil {
		wait, cancelWait := workflow.WithCancel(w.root)
		sel := workflow.NewSelector(wait)
		sel.AddFuture(w.future, func(f workflow.Future) { w.settle(f.Get(wait, nil)) })
		sel.AddFuture(workflow.NewTimer(wait, w.silence+watchGrace), func(workflow.Future) {})
		sel.Select(wait)
		cancelWait()
	}
	return lostWorker(w.lost)
}

// finish ends the watch and returns the run's error: err itself, or, when
// a worker was lost (before err, or within the grace after it), the
// WorkerLost error after stopping the job on the surviving workers.
func (w *workerWatch) finish(err error) error {
	defer w.stopWatch()
	if err == nil {
		// A loss after the results were complete (e.g. while reading
		// metrics back) does not make them wrong.
		return nil
	}
	w.explain(err)
	lost := lostWorker(w.lost)
	if lost == nil {
		return err
	}
	var detail activities.WorkerLost
	_ = lost.Details(&detail)
	dctx, _ := workflow.NewDisconnectedContext(w.root)
	dctx = workflow.WithActivityOptions(dctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		Summary:             "stop-job",
	})
	msg := lost.Message()
	if stopErr := workflow.ExecuteActivity(dctx, a.StopJob, activities.StopJobInput{
		JobID: w.jobID, Workers: w.workers, Lost: []string{detail.WorkerID},
	}).Get(dctx, nil); stopErr != nil {
		msg += fmt.Sprintf("; stopping the job on the other workers failed too: %v", stopErr)
	}
	if !temporal.IsCanceledError(err) {
		// What failed first (a step talking to the dead worker) is in the
		// history; the reason stays one line.
		workflow.GetLogger(w.root).Warn("run failed while a worker was lost", "worker", detail.WorkerID, "error", err)
	}
	return temporal.NewNonRetryableApplicationError(msg, activities.ErrTypeWorkerLost, nil, detail)
}
