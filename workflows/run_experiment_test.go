package workflows

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/workflows/plan"
)

func helloExperiment() ExperimentInput {
	return ExperimentInput{
		Name:                "hello-test",
		QueryName:           "hello",
		TotalRuntimeSeconds: 90,
		Reconfigurations: []ReconfigSpec{
			{TriggerTimeSeconds: 30, Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: 2},
		},
		ReconfigProtocol: ProtocolStopAndRestart,
		NumBuckets:       128,
		BatchSize:        1000,
		Partitions:       4,
		Parallelism:      map[string]int{"source": 1, "mapper": 1, "sink": 1},
		Producer:         ProducerSpec{Generator: "keys", RatePerSec: 100, NumKeys: 1000, Seed: 1, ValueSize: 64, Producers: 1},
		MinWorkers:       3,
		KafkaBrokers:     []string{"127.0.0.1:9092"},
	}
}

// experimentMocks are the canned answers of the activities RunExperiment calls.
type experimentMocks struct {
	job              func(jobID string) control.JobSpec // default helloJob
	ackedPerProducer int64
	sink             activities.SinkCounts
	endOffsets       map[int32]int64
	unchecked        string // the job's ExactnessUnchecked
	// watchAfter, when set, ends the worker watch after that much workflow
	// time with watchErr (default: it runs until cancelled).
	watchAfter time.Duration
	watchErr   error
	// watchOnce: only the first watch ends so; later ones run on.
	watchOnce bool
}

func mockExperimentActivities(env *testsuite.TestWorkflowEnvironment, calls *activityLog, m experimentMocks) {
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.DiscoverWorkers, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DiscoverInput) ([]control.WorkerInfo, error) {
			calls.add("DiscoverWorkers", in, env.Now())
			if len(in.Want) == 0 {
				return testWorkers(), nil
			}
			var got []control.WorkerInfo
			for _, w := range testWorkers() {
				if slices.Contains(in.Want, w.ID) {
					got = append(got, w)
				}
			}
			return got, nil
		})
	env.OnActivity(a.BuildJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.JobInput) (control.JobSpec, error) {
			calls.add("BuildJob", in, env.Now())
			build := m.job
			if build == nil {
				build = helloJob
			}
			job := build(in.JobID)
			job.Experiment = in.Experiment
			job.ExactnessUnchecked = m.unchecked
			return job, nil
		})
	env.OnActivity(a.CreateTopic, mock.Anything, mock.Anything).Return(
		func(_ context.Context, job control.JobSpec) error {
			calls.add("CreateTopic", job, env.Now())
			return nil
		})
	tasks := func(name string) func(context.Context, activities.TasksInput) error {
		return func(_ context.Context, in activities.TasksInput) error {
			calls.add(name, in, env.Now())
			return nil
		}
	}
	env.OnActivity(a.DeployTasks, mock.Anything, mock.Anything).Return(tasks("DeployTasks"))
	env.OnActivity(a.StartTasks, mock.Anything, mock.Anything).Return(tasks("StartTasks"))
	env.OnActivity(a.StopTasks, mock.Anything, mock.Anything).Return(tasks("StopTasks"))
	env.OnActivity(a.StartProducer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ProducerInput) error {
			calls.add("StartProducer", in, env.Now())
			return nil
		})
	env.OnActivity(a.StopProducer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ProducerInput) (control.ProduceReport, error) {
			calls.add("StopProducer", in, env.Now())
			return control.ProduceReport{Acked: m.ackedPerProducer}, nil
		})
	env.OnActivity(a.EndOffsets, mock.Anything, mock.Anything).Return(
		func(_ context.Context, job control.JobSpec) (map[int32]int64, error) {
			calls.add("EndOffsets", job, env.Now())
			return m.endOffsets, nil
		})
	env.OnActivity(a.FinishAndDrain, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.DrainInput) (activities.DrainReport, error) {
			calls.add("FinishAndDrain", in, env.Now())
			return activities.DrainReport{Millis: 40}, nil
		})
	env.OnActivity(a.CollectSinkCounts, mock.Anything, mock.Anything).Return(
		func(_ context.Context, dep control.Deployment) (activities.SinkCounts, error) {
			calls.add("CollectSinkCounts", dep, env.Now())
			return m.sink, nil
		})
	// The worker watch runs for the whole run; blocking on the workflow
	// clock (After) keeps the test clock skipping ahead.
	watchAfter, watchErr := 24*time.Hour, error(nil)
	if m.watchAfter > 0 {
		watchAfter, watchErr = m.watchAfter, m.watchErr
	}
	var watches int
	env.OnActivity(a.WatchWorkers, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		watches++
		if m.watchOnce && watches > 1 {
			return 24 * time.Hour
		}
		return watchAfter
	}).Return(
		func(_ context.Context, in activities.WatchInput) error {
			calls.add("WatchWorkers", in, env.Now())
			return watchErr
		})
	env.OnActivity(a.StopJob, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StopJobInput) error {
			calls.add("StopJob", in, env.Now())
			return nil
		})
	env.OnActivity(a.DropRemoteState, mock.Anything, mock.Anything).Return(
		func(_ context.Context, job control.JobSpec) error {
			calls.add("DropRemoteState", job, env.Now())
			return nil
		})
	env.OnActivity(a.Throughput, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SeriesInput) ([]metrics.Point, error) {
			calls.add("Throughput", in, env.Now())
			return nil, nil
		})
	env.OnActivity(a.ReconfigEvents, mock.Anything, mock.Anything).Return(
		func(_ context.Context, jobID string) ([]metrics.ReconfigEvent, error) {
			calls.add("ReconfigEvents", jobID, env.Now())
			return nil, nil
		})
}

// childCall is what the mocked ReconfigureStopAndRestart child saw.
type childCall struct {
	mu    sync.Mutex
	calls []ReconfigureInput
	at    []time.Time
}

func TestRunExperiment(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		producers              int
		ackedPerProducer       int64
		sink                   activities.SinkCounts
		wantProduced, wantLost int64
		wantDuplicated         int64
	}{
		{
			name: "exactly once", producers: 1, ackedPerProducer: 1000,
			sink:         activities.SinkCounts{Received: 1000, Distinct: 1000, Tasks: 1},
			wantProduced: 1000,
		},
		{
			name: "losses and duplicates are counted", producers: 2, ackedPerProducer: 500,
			sink:         activities.SinkCounts{Received: 993, Distinct: 990, Duplicates: 3, Tasks: 1},
			wantProduced: 1000, wantLost: 10, wantDuplicated: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "hello test/1"})
			var calls activityLog
			ends := map[int32]int64{0: 250, 1: 250, 2: 250, 3: 250}
			mockExperimentActivities(env, &calls, experimentMocks{ackedPerProducer: tc.ackedPerProducer, sink: tc.sink, endOffsets: ends})

			var child childCall
			env.RegisterWorkflow(ReconfigureStopAndRestart)
			env.OnWorkflow(ReconfigureStopAndRestart, mock.Anything, mock.Anything).Return(
				func(_ workflow.Context, in ReconfigureInput) (ReconfigureResult, error) {
					child.mu.Lock()
					child.calls = append(child.calls, in)
					child.at = append(child.at, env.Now())
					child.mu.Unlock()
					p, err := plan.Scale(in.Current, in.Spec.TargetOperator, in.Spec.TargetParallelism, in.Workers)
					if err != nil {
						return ReconfigureResult{}, err
					}
					return ReconfigureResult{Deployment: p.New, Steps: []StepTiming{{Step: "plan", Millis: 1}, {Step: "resume", Millis: 2}}}, nil
				})

			in := helloExperiment()
			in.Producer.Producers = tc.producers
			env.ExecuteWorkflow(RunExperiment, in)

			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var res ExperimentResult
			require.NoError(t, env.GetWorkflowResult(&res))

			assert.Equal(t, "hello-test-1", res.JobID, "job id derived from the workflow id, safe for topics and subjects")
			assert.Equal(t, "hello-test-1", calls.of("BuildJob")[0].Input.(activities.JobInput).JobID)
			assert.Equal(t, "koala-hello-test-1", res.Topic)

			// The reconfiguration runs as a child at its trigger time.
			require.Len(t, child.calls, 1)
			at := child.at[0].Sub(res.StartedAt)
			assert.GreaterOrEqual(t, at, 30*time.Second, "child started at %s", at)
			assert.Less(t, at, 31*time.Second, "child started at %s", at)
			cin := child.calls[0]
			assert.Equal(t, "hello-test-1-reconfig-1", cin.ReconfigID)
			assert.Equal(t, in.Reconfigurations[0], cin.Spec)
			assert.Equal(t, testWorkers(), cin.Workers)
			assert.Equal(t, 1, parallelismOf(cin.Current, "mapper"), "the child gets the running deployment")
			require.Len(t, res.Reconfigs, 1)
			rc := res.Reconfigs[0]
			assert.Equal(t, "hello-test-1-reconfig-1", rc.WorkflowID)
			assert.Equal(t, ProtocolStopAndRestart, rc.Protocol)
			assert.InDelta(t, 30, rc.StartSec, 1)
			assert.Equal(t, []string{"plan", "resume"}, stepNames(rc.Steps))

			// The input ends at TotalRuntimeSeconds, on every producer.
			stops := calls.of("StopProducer")
			require.Len(t, stops, tc.producers)
			for _, s := range stops {
				assert.GreaterOrEqual(t, s.At.Sub(res.StartedAt), 90*time.Second, "StopProducer at %s", s.At.Sub(res.StartedAt))
			}
			assert.Len(t, calls.of("StartProducer"), tc.producers)

			// After the reconfiguration the run continues on the child's deployment.
			drain := calls.of("FinishAndDrain")
			require.Len(t, drain, 1)
			assert.Equal(t, ends, drain[0].Input.(activities.DrainInput).EndOffsets)
			assert.Equal(t, 2, parallelismOf(drain[0].Input.(activities.DrainInput).Deployment, "mapper"))
			counted := calls.of("CollectSinkCounts")
			require.Len(t, counted, 1)
			assert.Equal(t, 2, parallelismOf(counted[0].Input.(control.Deployment), "mapper"))
			assert.Equal(t, 2, parallelismOf(res.Final, "mapper"))
			assert.Greater(t, calls.index("CollectSinkCounts"), calls.index("FinishAndDrain"), "counts are read after the drain")
			stopped := calls.of("StopTasks")
			require.Len(t, stopped, 1)
			assert.Equal(t, res.Final, tasksOf(t, stopped[0]).Deployment, "all tasks of the final deployment are stopped")

			assert.Equal(t, tc.wantProduced, res.Produced)
			assert.Equal(t, tc.wantLost, res.Lost)
			assert.Equal(t, tc.wantDuplicated, res.Duplicated)
			assert.Equal(t, tc.sink, res.Sink)
		})
	}
}

// A failed reconfiguration fails the run, and the job's tasks are stopped.
func TestRunExperiment_ReconfigurationFailureStopsTasks(t *testing.T) {
	env := newTestEnv(t)
	var calls activityLog
	mockExperimentActivities(env, &calls, experimentMocks{ackedPerProducer: 1000, sink: activities.SinkCounts{Distinct: 1000}})
	env.RegisterWorkflow(ReconfigureStopAndRestart)
	env.OnWorkflow(ReconfigureStopAndRestart, mock.Anything, mock.Anything).Return(
		ReconfigureResult{}, temporal.NewNonRetryableApplicationError("operator \"nope\" not found", "InvalidReconfiguration", nil))

	env.ExecuteWorkflow(RunExperiment, helloExperiment())

	require.True(t, env.IsWorkflowCompleted())
	err := env.GetWorkflowError()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `operator "nope" not found`)
	assert.Len(t, calls.of("StopProducer"), len(calls.of("StartProducer")), "the run ends at the failure and stops the producers it started")
	require.NotEmpty(t, calls.of("StopTasks"), "cleanup stops the job's tasks")
	assert.Equal(t, 1, parallelismOf(tasksOf(t, calls.of("StopTasks")[0]).Deployment, "mapper"))
}

func TestRunExperiment_InvalidInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*ExperimentInput)
		wantMsg string
	}{
		{"TotalRuntimeSeconds 0", func(in *ExperimentInput) { in.TotalRuntimeSeconds = 0 }, "TotalRuntimeSeconds 0 must be > 0"},
		{"missing QueryName", func(in *ExperimentInput) { in.QueryName = "" }, "QueryName is required"},
		{"TargetParallelism 0", func(in *ExperimentInput) { in.Reconfigurations[0].TargetParallelism = 0 }, "Reconfigurations[0].TargetParrallelism 0"},
		{"no Kafka broker", func(in *ExperimentInput) { in.KafkaBrokers = nil }, "KafkaBrokers"},
		{"trigger after the end", func(in *ExperimentInput) { in.Reconfigurations[0].TriggerTimeSeconds = 90 }, "Reconfigurations[0].TriggerTimeSeconds 90"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.RegisterActivity(&activities.Activities{})
			env.RegisterWorkflow(ReconfigureStopAndRestart)
			var started []string
			env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				started = append(started, info.ActivityType.Name)
			})
			in := helloExperiment()
			tc.change(&in)
			env.ExecuteWorkflow(RunExperiment, in)

			require.True(t, env.IsWorkflowCompleted())
			err := env.GetWorkflowError()
			require.Error(t, err)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "want an ApplicationError in %v", err)
			assert.True(t, appErr.NonRetryable(), "invalid input is not retryable")
			assert.Equal(t, "BadConfig", appErr.Type())
			assert.Contains(t, appErr.Error(), tc.wantMsg)
			assert.Empty(t, started, "no activity runs for an invalid experiment")
		})
	}
}

// A run canceled while its job runs (koala compare interrupted, a run that
// exceeded its time limit) stops the job's tasks: a terminated workflow
// runs no code, and its tasks kept processing beside the next run.
func TestRunExperiment_CanceledStopsTasks(t *testing.T) {
	env := newTestEnv(t)
	var calls activityLog
	mockExperimentActivities(env, &calls, experimentMocks{ackedPerProducer: 1000, sink: activities.SinkCounts{Distinct: 1000}})
	in := helloExperiment()
	in.Reconfigurations = nil
	env.RegisterDelayedCallback(env.CancelWorkflow, 5*time.Second)

	env.ExecuteWorkflow(RunExperiment, in)

	require.True(t, env.IsWorkflowCompleted())
	require.Error(t, env.GetWorkflowError())
	require.NotEmpty(t, calls.of("StartTasks"), "the job ran before the cancel")
	require.NotEmpty(t, calls.of("StopTasks"), "a canceled run stops the job's tasks")
	require.NotEmpty(t, calls.of("StopProducer"), "and its producers")
}
