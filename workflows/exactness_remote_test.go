package workflows_test

import (
	"context"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/produce"
	"koala/statesvc"
	"koala/workflows"
)

// TestRemoteStateIsPerJob runs the same keyed counter twice, as two jobs
// over the same input keys, against one state service. Each job's counts
// must equal its own oracle: the second job must not start from the first
// one's counts (the sink ledger alone, which counts records, would not
// notice). The second job is rescaled 2→4 by stop-and-restart, so the tasks
// that reconfiguration deploys must share the job's state too.
func TestRemoteStateIsPerJob(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	// Started before the cluster so it stops after the workers.
	srv, err := statesvc.NewServer(statesvc.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	must(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	c := dptest.Start(t, dptest.Options{Workers: 3})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 20 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	must(t, err)

	const numKeys, seed = 500, 11 // few keys: every key is counted in both jobs
	for i, jobID := range []string{"remote-ns-first", "remote-ns-second"} {
		job, dep := startJob(t, ctx, acts, workers, activities.JobInput{
			JobID: jobID, Query: "counter", Parallelism: map[string]int{"counter": 2},
			NumBuckets: 32, BatchSize: 100, Partitions: 2, KafkaBrokers: c.Brokers,
			StateBackend: statesvc.BackendRemotePebble,
			Params:       map[string]string{control.ParamRemotePebbleAddrs: srv.Addr()},
		})
		prod := activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
			Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, RatePerSec: 4000, NumKeys: numKeys, Seed: seed,
		}}
		must(t, acts.StartProducer(ctx, prod))
		waitForSink(t, ctx, acts, dep, 2000)
		if i == 1 {
			dep = reconfigure(t, acts, workflows.ReconfigureStopAndRestart, dep, workers, jobID+"-r1", 4)
			waitForSink(t, ctx, acts, dep, sinkStatus(t, ctx, acts, dep).SinkReceived+2000)
		}
		rep := stopAndCheckLedger(t, ctx, acts, job, dep, prod)
		oracle := map[string]uint64{}
		for n := int64(0); n < rep.Acked; n++ {
			oracle[produce.KeyName(produce.UniformKeyIndex(seed, numKeys, n))]++
		}
		assertMatchesOracle(t, sinkStatus(t, ctx, acts, dep, true).KeyValues, oracle, rep.Acked)
		must(t, acts.StopTasks(ctx, activities.TasksInput{Deployment: dep}))
		t.Logf("%s: %d records, %d keys exact", jobID, rep.Acked, len(oracle))
	}
}
