package workflows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/workflows/plan"
)

// With ProducerWorkers the generators run there and no task does: the
// initial deployment and every reconfiguration use the other workers.
func TestRunExperiment_ProducerWorkers(t *testing.T) {
	env := newTestEnv(t)
	var calls activityLog
	mockExperimentActivities(env, &calls, experimentMocks{ackedPerProducer: 500, sink: activities.SinkCounts{Received: 1000, Distinct: 1000, Tasks: 1}})
	var childWorkers [][]string
	env.RegisterWorkflow(ReconfigureStopAndRestart)
	env.OnWorkflow(ReconfigureStopAndRestart, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
			childWorkers = append(childWorkers, workerIDs(in.Workers))
			p, err := plan.Scale(in.Current, in.Spec.TargetOperator, in.Spec.TargetParallelism, in.Workers)
			if err != nil {
				return ReconfigureResult{}, err
			}
			return ReconfigureResult{Deployment: p.New}, nil
		})
	in := helloExperiment()
	in.MinWorkers = 2
	in.Producer.Producers = 2
	in.ProducerWorkers = []string{"w3"}
	env.ExecuteWorkflow(RunExperiment, in)

	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res ExperimentResult
	require.NoError(t, env.GetWorkflowResult(&res))

	discover := calls.of("DiscoverWorkers")
	require.Len(t, discover, 2)
	assert.Equal(t, 3, discover[0].Input.(activities.DiscoverInput).Min, "MinWorkers task workers plus the producer worker")
	assert.Equal(t, []string{"w3"}, discover[1].Input.(activities.DiscoverInput).Want)
	starts := calls.of("StartProducer")
	require.Len(t, starts, 2)
	for _, s := range starts {
		assert.Equal(t, "w3", s.Input.(activities.ProducerInput).WorkerID)
	}
	deployed := tasksOf(t, calls.of("DeployTasks")[0]).Deployment
	require.NotEmpty(t, deployed.Tasks)
	for _, task := range deployed.Tasks {
		assert.NotEqual(t, "w3", task.WorkerID, "task %s placed on the producer worker", task.ID)
	}
	require.Len(t, childWorkers, 1)
	assert.Equal(t, []string{"w1", "w2"}, childWorkers[0], "reconfigurations place tasks on the task workers only")
	for _, task := range res.Final.Tasks {
		assert.NotEqual(t, "w3", task.WorkerID, "task %s placed on the producer worker", task.ID)
	}
	assert.Equal(t, int64(1000), res.Produced)
}

// A producer worker that is also a task worker, or one that leaves fewer
// than MinWorkers for the tasks, is a configuration error.
func TestRunExperiment_ProducerWorkersInvalid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*ExperimentInput)
		wantMsg string
	}{
		{"overlap", func(in *ExperimentInput) { in.Workers = []string{"w1", "w2"}; in.ProducerWorkers = []string{"w2"} },
			"ProducerWorkers w2 are also in Workers"},
		{"no task worker left", func(in *ExperimentInput) {
			in.Workers = []string{"w1"}
			in.MinWorkers = 2
			in.ProducerWorkers = []string{"w3"}
		}, "1 worker(s) left for tasks besides ProducerWorkers w3, MinWorkers is 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			var calls activityLog
			mockExperimentActivities(env, &calls, experimentMocks{})
			in := helloExperiment()
			tc.change(&in)
			env.ExecuteWorkflow(RunExperiment, in)

			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "want an ApplicationError in %v", err)
			assert.Equal(t, "BadConfig", appErr.Type())
			assert.Contains(t, appErr.Error(), tc.wantMsg)
			assert.Empty(t, calls.of("StartProducer"))
			assert.Empty(t, calls.of("DeployTasks"))
		})
	}
}
