package workflows

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

func TestWarmUpOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		params  map[string]string
		reconf  bool
		wantErr string
	}{
		{name: "plain run", params: nil},
		{name: "warm-up", params: map[string]string{"IsWarmUp": "true", "NumEvents": "1000"}},
		{name: "warm-up without NumEvents", params: map[string]string{"IsWarmUp": "true"}, wantErr: "IsWarmUp needs NumEvents > 0"},
		{name: "warm-up with reconfigurations", params: map[string]string{"IsWarmUp": "true", "NumEvents": "5"}, reconf: true, wantErr: "has 1 Reconfigurations"},
		{name: "both", params: map[string]string{"IsWarmUp": "true", "LoadWarmUpData": "true", "NumEvents": "5"}, wantErr: "both true"},
		{name: "load by NumEvents", params: map[string]string{"LoadWarmUpData": "true", "NumEvents": "5"}},
		{name: "load by dir", params: map[string]string{"LoadWarmUpData": "true", "WarmUpSnapshotDir": "/x"}},
		{name: "load without a way to find it", params: map[string]string{"LoadWarmUpData": "true"}, wantErr: "needs WarmUpSnapshotDir or the warm-up's NumEvents"},
		{name: "bad OutputEventNumber", params: map[string]string{"LoadWarmUpData": "true", "NumEvents": "5", "OutputEventNumber": "x"}, wantErr: `OutputEventNumber "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := helloExperiment()
			if !tc.reconf {
				in.Reconfigurations = nil
			}
			in.Params = tc.params
			_, err := warmUpOf(in)
			if tc.wantErr == "" {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			}
		})
	}
}

func TestWarmUpProducers(t *testing.T) {
	three := func(gen string) []activities.ProducerInput {
		var out []activities.ProducerInput
		for range 3 {
			p := activities.ProducerInput{}
			p.Request.Generator, p.Request.NumKeys = gen, 77
			out = append(out, p)
		}
		return out
	}
	type want struct{ start, max int64 }
	for _, tc := range []struct {
		name     string
		w        warmUp
		m        activities.SnapshotManifest
		gen      string
		want     []want
		wantKeys int
		nexmark  *control.NexmarkSource
	}{
		{name: "warm-up splits the sequence", w: warmUp{save: true, numEvents: 100, resume: -1}, gen: produce.SequentialGenerator,
			want: []want{{0, 100}, {100, 100}, {200, 100}}, wantKeys: 300},
		{name: "warm-up of another generator keeps its key space", w: warmUp{save: true, numEvents: 100, resume: -1}, gen: "keys",
			want: []want{{0, 100}, {100, 100}, {200, 100}}, wantKeys: 77},
		{name: "sequential resumes at the key count", w: warmUp{load: true, resume: -1}, m: activities.SnapshotManifest{Keys: 300, NumEvents: 100, Producers: 3}, gen: produce.SequentialGenerator,
			want: []want{{300, 0}, {300, 0}, {300, 0}}, wantKeys: 77},
		{name: "OutputEventNumber wins", w: warmUp{load: true, resume: 4600}, m: activities.SnapshotManifest{Keys: 300}, gen: produce.SequentialGenerator,
			want: []want{{4600, 0}, {4600, 0}, {4600, 0}}, wantKeys: 77},
		{name: "other generators resume after the warm-up's events", w: warmUp{load: true, resume: -1}, m: activities.SnapshotManifest{Keys: 10, NumEvents: 100, Producers: 3}, gen: "keys",
			want: []want{{300, 0}, {300, 0}, {300, 0}}, wantKeys: 77},
		{name: "Nexmark resumes at its own OutputEventNumber", w: warmUp{load: true, resume: 4600}, m: activities.SnapshotManifest{Keys: 300}, gen: "nexmark",
			nexmark: &control.NexmarkSource{OutputEventNumber: 4600}, want: []want{{0, 0}, {0, 0}, {0, 0}}, wantKeys: 77},
		{name: "plain run unchanged", w: warmUp{resume: -1}, gen: produce.SequentialGenerator,
			want: []want{{0, 0}, {0, 0}, {0, 0}}, wantKeys: 77},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := three(tc.gen)
			for i := range in {
				in[i].Request.Nexmark = tc.nexmark
			}
			out := warmUpProducers(helloExperiment(), tc.w, tc.m, in)
			var got []want
			for _, p := range out {
				got = append(got, want{p.Request.StartEvent, p.Request.MaxEvents})
				assert.Equal(t, tc.wantKeys, p.Request.NumKeys)
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, int64(0), in[0].Request.StartEvent, "the input is not modified")
		})
	}
}

// TestRunExperimentWarmUpSteps checks where the warm-up steps sit in a
// run's history: a warm-up snapshots after the drain and the sink counts,
// before the tasks stop; a measurement run loads between deploying and
// starting the tasks and resumes its producers.
func TestRunExperimentWarmUpSteps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		params    map[string]string
		acked     int64
		wantOrder []string
		wantErr   string
	}{
		{name: "warm-up", params: map[string]string{"IsWarmUp": "true", "NumEvents": "500"}, acked: 500,
			wantOrder: []string{"DeployTasks", "StartTasks", "StartProducer", "AwaitSinkRecords", "StopProducer", "FinishAndDrain", "CollectSinkCounts", "SnapshotState", "StopTasks"}},
		{name: "warm-up cut short", params: map[string]string{"IsWarmUp": "true", "NumEvents": "500"}, acked: 400,
			wantErr: "warm-up produced 400 of its 500 records"},
		{name: "measurement", params: map[string]string{"LoadWarmUpData": "true", "NumEvents": "500", "OutputEventNumber": "23000"}, acked: 100,
			wantOrder: []string{"DeployTasks", "LoadSnapshot", "StartTasks", "StartProducer", "StopProducer", "FinishAndDrain", "CollectSinkCounts", "StopTasks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "warm/1"})
			var calls activityLog
			mockExperimentActivities(env, &calls, experimentMocks{ackedPerProducer: tc.acked, sink: activities.SinkCounts{Received: uint64(tc.acked), Distinct: uint64(tc.acked), Tasks: 1}})
			env.OnActivity(a.SnapshotState, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.SnapshotInput) (activities.SnapshotManifest, error) {
					calls.add("SnapshotState", in, env.Now())
					return activities.SnapshotManifest{Keys: 500}, nil
				})
			env.OnActivity(a.AwaitSinkRecords, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.AwaitSinkInput) (activities.SinkCounts, error) {
					calls.add("AwaitSinkRecords", in, env.Now())
					return activities.SinkCounts{Distinct: uint64(tc.acked)}, nil
				})
			env.OnActivity(a.LoadSnapshot, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.SnapshotInput) (activities.SnapshotManifest, error) {
					calls.add("LoadSnapshot", in, env.Now())
					return activities.SnapshotManifest{Keys: 500, NumEvents: 500, Producers: 1}, nil
				})
			in := helloExperiment()
			in.Reconfigurations = nil
			in.Producer.Generator = produce.SequentialGenerator
			in.Params = tc.params
			env.ExecuteWorkflow(RunExperiment, in)
			require.True(t, env.IsWorkflowCompleted())
			if tc.wantErr != "" {
				require.Error(t, env.GetWorkflowError())
				assert.Contains(t, env.GetWorkflowError().Error(), tc.wantErr)
				assert.Empty(t, calls.of("SnapshotState"), "no snapshot of a cut-short warm-up")
				return
			}
			require.NoError(t, env.GetWorkflowError())
			var order []string
			for _, n := range calls.names() {
				if slices.Contains(tc.wantOrder, n) {
					order = append(order, n)
				}
			}
			assert.Equal(t, tc.wantOrder, order)
			req := calls.of("StartProducer")[0].Input.(activities.ProducerInput).Request
			switch tc.name {
			case "warm-up":
				assert.Equal(t, int64(0), req.StartEvent)
				assert.Equal(t, int64(500), req.MaxEvents)
				assert.Equal(t, 500, req.NumKeys, "one new key per warm-up record")
				await := calls.of("AwaitSinkRecords")[0].Input.(activities.AwaitSinkInput)
				assert.Equal(t, uint64(500), await.Want)
				assert.InDelta(t, 90, await.TimeoutSecs, 1, "bounded by TotalRuntimeSeconds")
				stop := calls.of("StopProducer")[0].At.Sub(calls.of("StartProducer")[0].At)
				assert.Less(t, stop, 90*time.Second, "the input ends when it is all in, not at TotalRuntimeSeconds")
				snap := calls.of("SnapshotState")[0].Input.(activities.SnapshotInput)
				assert.Equal(t, int64(500), snap.NumEvents)
				assert.Equal(t, "hello", snap.Deployment.Job.Query)
			case "measurement":
				assert.Empty(t, calls.of("AwaitSinkRecords"))
				assert.GreaterOrEqual(t, calls.of("StopProducer")[0].At.Sub(calls.of("StartProducer")[0].At), 90*time.Second)
				assert.Equal(t, int64(23000), req.StartEvent, "resumes at OutputEventNumber")
				assert.Equal(t, int64(0), req.MaxEvents)
				assert.Equal(t, int64(500), calls.of("LoadSnapshot")[0].Input.(activities.SnapshotInput).NumEvents)
			}
		})
	}
}
