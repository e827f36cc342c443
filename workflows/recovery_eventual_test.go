package workflows_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"koala/dataplane/control"
	"koala/workflows"
	"koala/workflows/plan"
)

// TestRecoverFromCheckpointDuringEventualMigration: a lazy 2→4 scale-out
// under eventual migration, paced (small pulls at the lowest byte rate) so
// the background migration outlasts a checkpoint, runs as a workflow; right after its routing swap (the
// moment RunExperiment may start checkpoints again) a checkpoint of the
// new deployment completes while its migration step still waits for keys.
// Once the reconfiguration is done, a worker is killed and the job is
// recovered from that checkpoint: the sink matches the per-key oracle.
func TestRecoverFromCheckpointDuringEventualMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	j := startCheckpointedJob(t, ctx, "ckpt-eventual", 40000, map[string]string{control.ParamMigrationMode: control.ModeEventual, control.ParamGradualBatchSize: "5",
		control.ParamMigrationRate: strconv.Itoa(control.MinMigrationRate)})
	waitForSink(t, ctx, j.acts, j.dep, 3000)
	j.checkpoint(t, 1)
	st := sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+3000)

	swapped := make(chan struct{})
	var scaled control.Deployment // the scale-out's plan, installed by the swap
	type outcome struct {
		res workflows.ReconfigureResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.SetTestTimeout(4 * time.Minute)
		env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
		env.RegisterActivity(j.acts)
		env.SetOnActivityCompletedListener(func(info *activity.Info, result converter.EncodedValue, err error) {
			switch {
			case err != nil:
			case info.ActivityType.Name == "PlanScale":
				var p plan.Plan
				if result.Get(&p) == nil {
					scaled = p.New // read after swapped is closed
				}
			case info.ActivityType.Name == "SwapRoutes":
				close(swapped)
			}
		})
		env.ExecuteWorkflow(workflows.ReconfigureLazy, workflows.ReconfigureInput{
			ReconfigID: j.job.JobID + "-r1", Current: j.dep, Workers: j.workers,
			Spec: workflows.ReconfigSpec{Type: plan.KindScaleUp, TargetOperator: "counter", TargetParallelism: 4},
		})
		var o outcome
		if o.err = env.GetWorkflowError(); o.err == nil {
			o.err = env.GetWorkflowResult(&o.res)
		}
		done <- o
	}()
	var o outcome
	select {
	case <-swapped:
	case o = <-done:
		t.Fatalf("reconfiguration ended before its routing swap was seen: %v", o.err)
	case <-ctx.Done():
		t.Fatal("no routing swap within the test's time")
	}
	if len(scaled.TasksOf("counter")) != 4 {
		t.Fatalf("planned deployment has %d counter tasks, want 4", len(scaled.TasksOf("counter")))
	}
	cp := j.checkpointMidMigration(t, scaled, 2)
	atCheckpoint := kltPending(t, ctx, j.acts, scaled)
	select {
	case o = <-done:
		t.Fatalf("the migration step ended before the checkpoint completed (%d keys still to migrate): the test did not cover a checkpoint during it", atCheckpoint)
	default:
	}
	if atCheckpoint == 0 {
		t.Fatalf("no key left to migrate when the checkpoint completed")
	}
	t.Logf("checkpoint %s completed with %d keys still to migrate in the background", cp.CheckpointID, atCheckpoint)
	select {
	case o = <-done:
	case <-ctx.Done():
		t.Fatal("the reconfiguration did not finish its migration")
	}
	if o.err != nil {
		t.Fatalf("reconfiguration: %v", o.err)
	}
	if got, want := o.res.Deployment.TasksOf("counter"), scaled.TasksOf("counter"); len(got) != len(want) {
		t.Fatalf("reconfiguration ended with %d counter tasks, checkpointed %d", len(got), len(want))
	}
	j.dep = o.res.Deployment
	st = sinkStatus(t, ctx, j.acts, j.dep)
	waitForSink(t, ctx, j.acts, j.dep, st.SinkReceived+2000) // input after the checkpoint
	victim := victimWorker(t, j.dep, j.prod.WorkerID)
	rec := j.recover(t, victim)
	if rec.CheckpointID != cp.CheckpointID {
		t.Fatalf("recovered from %s, want %s (taken during the migration)", rec.CheckpointID, cp.CheckpointID)
	}
	if left := kltPending(t, ctx, j.acts, rec.Deployment); left != 0 {
		t.Fatalf("%d lookup entries after the recovery, want 0 (resolved at restore)", left)
	}
	j.finishExact(t, ctx, victim)
}
