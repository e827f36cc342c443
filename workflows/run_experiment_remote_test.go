package workflows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/statesvc"
)

func remoteHelloJob(jobID string) control.JobSpec {
	job := helloJob(jobID)
	job.StateBackend = statesvc.BackendRemotePebble
	job.Params = map[string]string{"RemotePebbleAddrs": "127.0.0.1:7600"}
	return job
}

// A remote-pebble run drops its job's state from the state service once its
// tasks stopped, whether it succeeded or failed; other backends do not call
// the state service.
func TestRunExperiment_DropsRemoteState(t *testing.T) {
	for _, tc := range []struct {
		name     string
		job      func(string) control.JobSpec
		failing  bool // the reconfiguration fails: cleanup path
		wantDrop bool
	}{
		{"remote run", remoteHelloJob, false, true},
		{"remote run that fails", remoteHelloJob, true, true},
		{"pebble run", helloJob, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "remote-ns-1"})
			var calls activityLog
			mockExperimentActivities(env, &calls, experimentMocks{job: tc.job, ackedPerProducer: 1000, sink: activities.SinkCounts{Received: 1000, Distinct: 1000, Tasks: 1}})
			env.RegisterWorkflow(ReconfigureStopAndRestart)
			if tc.failing {
				env.OnWorkflow(ReconfigureStopAndRestart, mock.Anything, mock.Anything).Return(
					ReconfigureResult{}, temporal.NewNonRetryableApplicationError("boom", "InvalidReconfiguration", nil))
			} else {
				env.OnWorkflow(ReconfigureStopAndRestart, mock.Anything, mock.Anything).Return(
					func(_ workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
						return ReconfigureResult{Deployment: in.Current}, nil
					})
			}
			env.ExecuteWorkflow(RunExperiment, helloExperiment())
			require.True(t, env.IsWorkflowCompleted())
			if tc.failing {
				require.Error(t, env.GetWorkflowError())
			} else {
				require.NoError(t, env.GetWorkflowError())
			}
			drops := calls.of("DropRemoteState")
			if !tc.wantDrop {
				assert.Empty(t, drops)
				return
			}
			require.Len(t, drops, 1)
			assert.Equal(t, "remote-ns-1", drops[0].Input.(control.JobSpec).JobID)
			assert.Greater(t, calls.index("DropRemoteState"), calls.index("StopTasks"), "state is dropped only after the tasks stopped")
		})
	}
}
