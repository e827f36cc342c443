package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"koala/workflows/plan"
)

// migrateSpec is the artifact's task migration as a config gives it: two
// steps naming only the operator.
func migrateSpec(at int, op string) ReconfigSpec {
	return ReconfigSpec{TriggerTimeSeconds: at, Type: plan.KindTaskMigration, TargetOperator: op}
}

// A task migration that names only its operator gets its task and worker
// chosen from the deployment when its first step starts; the second step
// takes the migration the first left pending, and the run's outcomes
// record what was chosen.
func TestRunExperiment_TaskMigrationChoosesTaskAndWorker(t *testing.T) {
	in := twoKeyedExperiment(ProtocolLazy, migrateSpec(30, "second"), migrateSpec(30, "second"))
	children, res, err := runScheduled(t, in, ReconfigureLazy, nil)
	require.NoError(t, err)
	runs := children.byOperator("second")
	require.Len(t, runs, 2)
	want, err := plan.ChooseMigration(runs[0].in.Current, "second", "", "", runs[0].in.Workers)
	require.NoError(t, err)
	require.Equal(t, 1, want.Step)
	for i, r := range runs {
		assert.Equalf(t, want.TaskID, r.in.Spec.TaskID, "step %d", i+1)
		assert.Equalf(t, want.To, r.in.Spec.TargetWorker, "step %d", i+1)
	}
	assert.False(t, runs[1].start.Before(runs[0].end), "the second step queues behind the first")
	_, pending, _ := plan.Pending(runs[1].in.Current, "second")
	assert.True(t, pending, "the second step starts from the first's pending migration")
	_, pending, _ = plan.Pending(res.Final, "second")
	assert.False(t, pending, "the migration is complete")
	tasks := res.Final.TasksOf("second")
	require.Len(t, tasks, 2)
	assert.Equal(t, want.To, tasks[len(tasks)-1].WorkerID, "the moved buckets run on the chosen worker")
	require.NoError(t, plan.Validate(res.Final))
	require.Len(t, res.Reconfigs, 2)
	assert.Equal(t, want.TaskID, res.Reconfigs[0].Spec.TaskID, "the outcome records the chosen task")
	assert.Equal(t, want.To, res.Reconfigs[1].Spec.TargetWorker)
	// The Temporal UI's summaries name the task and the workers.
	assert.Equal(t, "task-migration of second: "+want.String(), migrationSummary(runs[0].in.Spec, runs[0].in.Current, runs[0].in.Workers))
	assert.Equal(t, "plan: task-migration of second: task "+want.TaskID+": worker "+want.From+" → worker "+want.To+" (step 1/2: evacuate)",
		(&stepRunner{in: runs[0].in}).summary("plan"))
	assert.Equal(t, "plan: task-migration of second: task "+want.TaskID+" → worker "+want.To+" (step 2/2: place)",
		(&stepRunner{in: runs[1].in}).summary("plan"))
	assert.Equal(t, "deploy-tasks", (&stepRunner{in: runs[1].in}).summary("deploy-tasks"))
}

// With one worker there is nowhere to move a task: the run fails, naming
// the operator and why, and starts no reconfiguration.
func TestRunExperiment_TaskMigrationWithoutAnotherWorkerFails(t *testing.T) {
	in := twoKeyedExperiment(ProtocolLazy, migrateSpec(30, "second"), migrateSpec(30, "second"))
	in.Workers = []string{"w1"}
	children, _, err := runScheduled(t, in, ReconfigureLazy, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `task-migration of operator "second"`)
	assert.Contains(t, err.Error(), `is the job's only worker`)
	assert.Empty(t, children.byOperator("second"))
}

// A "reconfigure" update may leave the task and worker out too; it
// completes with the outcomes of both steps.
func TestRunExperiment_TaskMigrationUpdateChooses(t *testing.T) {
	var got, noOperator updateResult
	in := twoKeyedExperiment(ProtocolLazy)
	children, _, err := runScheduled(t, in, ReconfigureLazy, func(env *testsuite.TestWorkflowEnvironment) {
		sendUpdate(env, 40*time.Second, "migrate", ReconfigSpec{Type: plan.KindTaskMigration, TargetOperator: "first"}, &got)
		sendUpdate(env, 45*time.Second, "no-operator", ReconfigSpec{Type: plan.KindTaskMigration, TargetWorker: "w2"}, &noOperator)
	})
	require.NoError(t, err)
	require.NoError(t, got.rejected)
	require.True(t, got.completed)
	require.NoError(t, got.err)
	require.Len(t, got.result.Outcomes, 2)
	assert.NotEmpty(t, got.result.Outcomes[0].Spec.TaskID)
	assert.NotEmpty(t, got.result.Outcomes[0].Spec.TargetWorker)
	assert.Equal(t, got.result.Outcomes[0].Spec, got.result.Outcomes[1].Spec)
	assert.Equal(t, 2, got.result.Parallelism)
	assert.Len(t, children.byOperator("first"), 2)
	require.Error(t, noOperator.rejected)
	assert.Contains(t, noOperator.rejected.Error(), "target_operator is required")
}
