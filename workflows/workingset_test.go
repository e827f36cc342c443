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

// TestLazyMigratesOnlyTheWorkingSet warms a keyed counter with 1 M keys,
// keeps only 10 % of them active, scales out 2→4 with fetch-on-demand and
// checks that the bytes migrated match the active keys that moved, not the
// total state that moved.
func TestLazyMigratesOnlyTheWorkingSet(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test with 1 M keys")
	}
	const (
		warmKeys    = 1_000_000
		activeKeys  = warmKeys / 10
		activeEvent = 5 * activeKeys // touches ~99 % of the active keys
		seed        = 11
		valueBytes  = 8 // the counter's state value
	)
	c := dptest.Start(t, dptest.Options{Workers: 3})
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: 3, Timeout: 10})
	must(t, err)
	job, dep := startJob(t, ctx, acts, workers, activities.JobInput{
		JobID: "workingset", Query: "counter", Parallelism: map[string]int{"counter": 2},
		NumBuckets: 128, BatchSize: 2000, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand},
	})

	// Warm-up: every key once.
	phase := func(gen string, keys int, events int64) activities.ProducerInput {
		return activities.ProducerInput{JobID: job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
			Topic: job.Topic, KafkaBrokers: job.KafkaBrokers, Generator: gen, NumKeys: keys, Seed: seed, MaxEvents: events,
		}}
	}
	warm := phase(produce.SequentialGenerator, warmKeys, warmKeys)
	must(t, acts.StartProducer(ctx, warm))
	waitForSinkWithin(t, ctx, acts, dep, warmKeys, 4*time.Minute)
	_, err = acts.StopProducer(ctx, warm)
	must(t, err)

	dep = reconfigure(t, acts, workflows.ReconfigureLazy, dep, workers, "workingset-r1", 4)
	kltEntries := 0
	for _, st := range counterStatus(t, ctx, acts, dep) {
		kltEntries += st.KLTSize
	}
	// Half of the buckets moved, so about half of the warm keys are remote.
	if kltEntries < warmKeys*4/10 || kltEntries > warmKeys*6/10 {
		t.Fatalf("key lookup tables hold %d entries after scale-out, want about %d", kltEntries, warmKeys/2)
	}

	active := phase(produce.DefaultGenerator, activeKeys, activeEvent)
	must(t, acts.StartProducer(ctx, active))
	waitForSinkWithin(t, ctx, acts, dep, warmKeys+activeEvent, 4*time.Minute)

	// Oracle: the active keys the input touched whose bucket moved.
	moved := movedBuckets(dep)
	touched := map[int]bool{}
	for n := int64(0); n < activeEvent; n++ {
		touched[produce.UniformKeyIndex(seed, activeKeys, n)] = true
	}
	var want, total uint64
	for i := range warmKeys {
		key := produce.KeyName(i)
		if !moved[statesvc.BucketOf([]byte(key), job.NumBuckets)] {
			continue
		}
		total += uint64(len(key) + valueBytes)
		if i < activeKeys && touched[i] {
			want += uint64(len(key) + valueBytes)
		}
	}
	var got uint64
	for _, st := range counterStatus(t, ctx, acts, dep) {
		got += st.BytesMoved
	}
	t.Logf("bytes migrated %d; active moved state %d; total moved state %d (%.1f%% of it migrated); KLT entries after scale-out %d",
		got, want, total, 100*float64(got)/float64(total), kltEntries)
	if got < want*8/10 || got > want*12/10 {
		t.Fatalf("fetch-on-demand migrated %d bytes, want within 20%% of the active keys' moved state %d (total moved state %d)", got, want, total)
	}
}

// movedBuckets are the counter's buckets owned by the added tasks.
func movedBuckets(dep control.Deployment) map[int]bool {
	table, _ := dep.Table("counter")
	out := map[int]bool{}
	for b, idx := range table.Buckets {
		if idx >= 2 {
			out[b] = true
		}
	}
	return out
}

func counterStatus(t *testing.T, ctx context.Context, acts *activities.Activities, dep control.Deployment) []control.TaskStatus {
	t.Helper()
	var out []control.TaskStatus
	for _, task := range dep.TasksOf("counter") {
		var st control.StatusReply
		data, err := control.NewEnvelope(dep.Job.JobID, "", control.TasksRequest{TaskIDs: []string{task.ID}})
		must(t, err)
		msg, err := acts.NC.RequestWithContext(ctx, control.WorkerSubject(task.WorkerID, control.VerbStatus), data)
		must(t, err)
		must(t, decodeReply(msg.Data, &st))
		out = append(out, st.Tasks...)
	}
	return out
}
