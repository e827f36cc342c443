package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"koala/workflows/autoscale"
)

// The job-state query follows the run: running with the operators'
// parallelism, the reconfiguration in progress, the end of the last one,
// and the end of the input.
func TestRunExperiment_JobStateQuery(t *testing.T) {
	states := map[string]*autoscale.JobState{}
	query := func(env *testsuite.TestWorkflowEnvironment, name string, at time.Duration) {
		env.RegisterDelayedCallback(func() {
			v, err := env.QueryWorkflow(QueryJobState)
			require.NoError(t, err)
			var st autoscale.JobState
			require.NoError(t, v.Get(&st))
			states[name] = &st
		}, at)
	}
	// "first" is reconfigured 2→4 from second 30 to 90; the input ends at 300.
	in := twoKeyedExperiment(ProtocolLazy, scaleSpec(30, "first", 4))
	var start time.Time
	var runEnv *testsuite.TestWorkflowEnvironment
	_, res, err := runScheduled(t, in, ReconfigureLazy, func(env *testsuite.TestWorkflowEnvironment) {
		start, runEnv = env.Now(), env
		query(env, "before", 10*time.Second)
		query(env, "during", 60*time.Second)
		query(env, "after", 120*time.Second)
	})
	require.NoError(t, err)
	// The run has completed; it still answers (a server replays it).
	v, qerr := runEnv.QueryWorkflow(QueryJobState)
	require.NoError(t, qerr)
	var endedState autoscale.JobState
	require.NoError(t, v.Get(&endedState))
	states["ended"] = &endedState
	require.Len(t, res.Reconfigs, 1)

	before := states["before"]
	require.NotNil(t, before)
	assert.Equal(t, autoscale.StatusRunning, before.Status)
	assert.Equal(t, "sched", before.JobID)
	assert.Equal(t, "sched", before.WorkflowID)
	assert.Equal(t, ProtocolLazy, before.Protocol)
	assert.True(t, before.PerOperator)
	assert.Equal(t, 128, before.NumBuckets)
	assert.Equal(t, 4, before.Partitions)
	assert.Equal(t, []string{"source", "first", "second", "sink"}, before.OperatorNames())
	first, _ := before.Operator("first")
	assert.Equal(t, 2, first.Parallelism)
	src, _ := before.Operator("source")
	sink, _ := before.Operator("sink")
	assert.True(t, src.Source && !src.Sink && sink.Sink && !sink.Source)
	assert.Empty(t, before.Reconfiguring)
	assert.True(t, before.LastReconfigEnd.IsZero())

	during := states["during"]
	require.NotNil(t, during)
	assert.Equal(t, []autoscale.Running{{Operator: "first", WorkflowID: "sched-reconfig-1"}}, during.Reconfiguring)

	after := states["after"]
	require.NotNil(t, after)
	assert.Empty(t, after.Reconfiguring)
	first, _ = after.Operator("first")
	assert.Equal(t, 4, first.Parallelism)
	end := res.StartedAt.Add(time.Duration(res.Reconfigs[0].EndSec * float64(time.Second)))
	assert.True(t, after.LastReconfigEnd.Equal(end), "last reconfiguration ended at %v, want %v", after.LastReconfigEnd, end)
	assert.False(t, end.Before(start.Add(90*time.Second)))

	ended := states["ended"]
	require.NotNil(t, ended)
	assert.Equal(t, autoscale.StatusEnded, ended.Status)
	assert.Equal(t, "its input ended (TotalRuntimeSeconds=300)", ended.Detail)
}
