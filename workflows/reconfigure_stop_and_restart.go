package workflows

import (
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/plan"
)

// ReconfigureStopAndRestart rescales one operator the classic way: pause the
// sources behind a barrier, drain, start the new tasks with the new routing,
// stop the removed ones, resume. Throughput is zero between pause and resume.
func ReconfigureStopAndRestart(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
	ctx = workflow.WithActivityOptions(ctx, stepOptions())
	r := newStepRunner(ctx, in, ProtocolStopAndRestart)

	var p plan.Plan
	if err := r.run("plan", a.PlanScale, planInput(in, r.info("plan")), &p); err != nil {
		return r.result(in.Current), err
	}
	var drained activities.DrainReport
	if err := r.run("pause-and-drain", a.PauseAndDrain, activities.DrainInput{
		Deployment: in.Current, BarrierID: in.ReconfigID, TimeoutSecs: 300, Step: r.info("pause-and-drain"),
	}, &drained); err != nil {
		return r.result(in.Current), err
	}
	added := taskIDs(p.AddedTasks)
	if len(added) > 0 {
		if err := r.run("deploy-tasks", a.DeployTasks, activities.TasksInput{Deployment: p.New, TaskIDs: added, Step: r.info("deploy-tasks")}, nil); err != nil {
			return r.resumeOld(in.Current, err)
		}
		if err := r.run("start-tasks", a.StartTasks, activities.TasksInput{Deployment: p.New, TaskIDs: added, Step: r.info("start-tasks")}, nil); err != nil {
			return r.resumeOld(in.Current, err)
		}
	}
	// Keyed state of the moved buckets moves while the sources are paused.
	// Added with a version marker: histories from before it replay unchanged.
	// With remote-pebble the state stays in the state service and only the
	// routing (metadata) moves; no checked-in history has a remote job.
	//
	// The move is timed from move-state's first handoff request (the new
	// owners start pulling then) to the last new owner's "migrated" event
	// during await-migration: the result's Moves and the await step's
	// result in the Temporal UI carry its bytes, that duration and their
	// rate. Reading the two results adds no command.
	if v := workflow.GetVersion(ctx, "stop-and-restart-moves-state", workflow.DefaultVersion, 1); v == 1 && isStateful(p) && !stateInService(p) {
		var handed activities.HandoffReport
		if err := r.run("move-state", a.Handoff, activities.HandoffInput{
			Deployment: p.New, Previous: p.Old, Pairs: ownerPairs(p), Eager: true, TimeoutSecs: 300, Step: r.info("move-state"),
		}, &handed); err != nil {
			return r.resumeOld(in.Current, err)
		}
		if err := r.awaitMigration("await-migration", activities.AwaitMigrationInput{
			Deployment: p.New, Tasks: gainingTasks(p), TimeoutSecs: 1800, Step: r.info("await-migration"),
		}, handed.StartedAt); err != nil {
			return r.result(p.New), err
		}
	}
	if err := r.run("update-routing", a.UpdateRouting, activities.TasksInput{Deployment: p.New, Step: r.info("update-routing")}, nil); err != nil {
		return r.result(in.Current), err
	}
	if removed := taskIDs(p.RemovedTasks); len(removed) > 0 {
		if err := r.run("stop-tasks", a.StopTasks, activities.TasksInput{Deployment: p.Old, TaskIDs: removed, Step: r.info("stop-tasks")}, nil); err != nil {
			return r.result(p.New), err
		}
	}
	if err := r.run("resume", a.ResumeSources, activities.TasksInput{Deployment: p.New, Step: r.info("resume")}, nil); err != nil {
		return r.result(p.New), err
	}
	return r.result(p.New), nil
}

// stateInService says whether the job keeps its keyed state in the remote
// state service, where every task reads it: nothing to move between tasks.
func stateInService(p plan.Plan) bool {
	return p.New.Job.StateBackend == "remote-pebble"
}
