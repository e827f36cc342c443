package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
)

func workerLostErr(worker string, silent time.Duration) error {
	return temporal.NewNonRetryableApplicationError("worker "+worker+" lost: no heartbeat for "+silent.String(),
		activities.ErrTypeWorkerLost, nil, activities.WorkerLost{WorkerID: worker, SilentSecs: silent.Seconds()})
}

// TestWorkerWatch covers the worker watch inside RunExperiment: the hello
// experiment's reconfiguration fires at 30 s; the watch reports w2 lost at
// the given time, or never.
func TestWorkerWatch(t *testing.T) {
	const never = 0
	cases := []struct {
		name     string
		protocol string        // default stop-and-restart
		lostAt   time.Duration // workflow time the watch fails at (never: it does not)
		// child is the reconfiguration child: it waits (cancellable) or
		// fails at once with childErr.
		childErr error
		// wantMsg is the whole message of the run's error.
		wantMsg  string
		wantType string
		// wantCancelled: the reconfiguration child saw its context cancelled.
		wantCancelled bool
		wantStopJob   bool
		// wantEndBy bounds the workflow time the run failed at.
		wantEndBy time.Duration
	}{
		{
			name: "loss during a reconfiguration cancels it", lostAt: 35 * time.Second,
			wantMsg: "worker w2 lost: no heartbeat for 10s", wantType: activities.ErrTypeWorkerLost,
			wantCancelled: true, wantStopJob: true, wantEndBy: 36 * time.Second,
		},
		{
			name: "loss during a concurrent-capable (lazy) reconfiguration cancels it", lostAt: 35 * time.Second, protocol: ProtocolLazy,
			wantMsg: "worker w2 lost: no heartbeat for 10s", wantType: activities.ErrTypeWorkerLost,
			wantCancelled: true, wantStopJob: true, wantEndBy: 36 * time.Second,
		},
		{
			name: "loss before the trigger cancels the timer", lostAt: 12 * time.Second,
			wantMsg: "worker w2 lost: no heartbeat for 10s", wantType: activities.ErrTypeWorkerLost,
			wantStopJob: true, wantEndBy: 13 * time.Second,
		},
		{
			name: "a step failing first is explained by the loss", lostAt: 38 * time.Second,
			childErr: errors.New(`worker "w2" does not answer state.handoff`),
			wantMsg:  "worker w2 lost: no heartbeat for 10s",
			wantType: activities.ErrTypeWorkerLost, wantStopJob: true, wantEndBy: 39 * time.Second,
		},
		{
			name: "a failure no loss explains is reported after the grace", lostAt: never,
			childErr: errors.New("disk full"),
			wantMsg:  "disk full", wantEndBy: 30*time.Second + activities.DefaultWorkerSilence + watchGrace + time.Second,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			calls := &activityLog{}
			m := experimentMocks{ackedPerProducer: 100, endOffsets: map[int32]int64{0: 100}}
			if tc.lostAt != never {
				m.watchAfter, m.watchErr = tc.lostAt, workerLostErr("w2", 10*time.Second)
			}
			mockExperimentActivities(env, calls, m)
			in := helloExperiment()
			childName := "ReconfigureStopAndRestart"
			if tc.protocol == ProtocolLazy {
				in.ReconfigProtocol, childName = ProtocolLazy, "ReconfigureLazy"
			}
			// A real (not mocked) child, so that it can be cancelled, under
			// the name of the protocol's workflow.
			cancelled := false
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
				if tc.childErr != nil {
					return ReconfigureResult{}, temporal.NewApplicationError(tc.childErr.Error(), "StepFailed")
				}
				err := workflow.Sleep(ctx, 10*time.Minute)
				cancelled = temporal.IsCanceledError(err)
				return ReconfigureResult{Deployment: in.Current}, err
			}, workflow.RegisterOptions{Name: childName})
			start := env.Now()

			env.ExecuteWorkflow(RunExperiment, in)

			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "want an ApplicationError in %v", err)
			if tc.wantType != "" {
				assert.Equal(t, tc.wantType, appErr.Type())
				assert.True(t, appErr.NonRetryable())
				var detail activities.WorkerLost
				require.NoError(t, appErr.Details(&detail))
				assert.Equal(t, "w2", detail.WorkerID)
			}
			assert.Contains(t, appErr.Message(), tc.wantMsg)
			if tc.wantType != "" {
				assert.Equal(t, tc.wantMsg, appErr.Message(), "nothing but the reason")
			}
			assert.Equal(t, tc.wantCancelled, cancelled, "the reconfiguration child was cancelled")
			assert.Len(t, calls.of("StopProducer"), len(calls.of("StartProducer")), "a failed run stops every producer it started")

			stops := calls.of("StopJob")
			if tc.wantStopJob {
				require.Len(t, stops, 1)
				in := stops[0].Input.(activities.StopJobInput)
				assert.Equal(t, []string{"w1", "w2", "w3"}, in.Workers)
				assert.Equal(t, []string{"w2"}, in.Lost)
				assert.NotEmpty(t, in.JobID)
				assert.LessOrEqual(t, stops[0].At.Sub(start), tc.wantEndBy)
			} else {
				assert.Empty(t, stops)
			}
			watches := calls.of("WatchWorkers")
			if tc.lostAt != never {
				require.Len(t, watches, 1)
				assert.Equal(t, []string{"w1", "w2", "w3"}, watches[0].Input.(activities.WatchInput).Workers)
			}
			end := env.Now().Sub(start)
			assert.LessOrEqual(t, end, tc.wantEndBy, "the run failed at %s of workflow time", end)
		})
	}
}
