package workflows_test

import (
	"context"
	"encoding/binary"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/dptest"
	"koala/dataplane/produce"
	"koala/statesvc"
	"koala/workflows"
)

// warmJob deploys (does not start) a keyed counter job on a fresh
// in-process cluster.
func warmJob(t *testing.T, ctx context.Context, c *dptest.Cluster, jobID string, parallelism, buckets int) (*activities.Activities, []control.WorkerInfo, control.Deployment) {
	t.Helper()
	return warmJobOn(t, ctx, c, jobID, parallelism, buckets, "pebble", nil)
}

// warmJobOn is warmJob with another state backend and more job params.
func warmJobOn(t *testing.T, ctx context.Context, c *dptest.Cluster, jobID string, parallelism, buckets int, backend string, params map[string]string) (*activities.Activities, []control.WorkerInfo, control.Deployment) {
	t.Helper()
	p := map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand}
	maps.Copy(p, params)
	acts := &activities.Activities{NC: c.NC, RequestTimeout: 30 * time.Second}
	workers, err := acts.DiscoverWorkers(ctx, activities.DiscoverInput{Min: len(c.Workers), Timeout: 10})
	must(t, err)
	_, dep := deployJob(t, ctx, acts, workers, activities.JobInput{
		JobID: jobID, Query: "counter", Parallelism: map[string]int{"counter": parallelism},
		NumBuckets: buckets, BatchSize: 1000, Partitions: 4, KafkaBrokers: c.Brokers, StateBackend: backend,
		Params: p,
	})
	return acts, workers, dep
}

// TestWarmUpSnapshotLoadAndLazyScaleOut builds warm-up state on one
// cluster (a bounded sequential stream from two producers, one new key per
// record), snapshots it, loads it into a job on a fresh cluster, scales the
// counter out 2→4 with fetch-on-demand and runs measured input over a
// small active key space. Every key the measurement touches must count its
// warm-up record plus its measured records, and the bytes migrated must be
// exactly the touched keys whose bucket moved, not the moved warm state.
func TestWarmUpSnapshotLoadAndLazyScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("two in-process clusters")
	}
	const (
		perProducer = 40_000
		producers   = 2
		warmKeys    = perProducer * producers
		activeKeys  = warmKeys / 10
		measured    = 3 * activeKeys
		buckets     = 128
		valueBytes  = 8 // the counter's state value
	)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	snapDir := filepath.Join(t.TempDir(), "snap")

	// Warm-up on cluster 1.
	c1 := dptest.Start(t, dptest.Options{Workers: 3})
	acts, workers, dep := warmJob(t, ctx, c1, "warm", 2, buckets)
	must(t, acts.StartTasks(ctx, activities.TasksInput{Deployment: dep}))
	var warm []activities.ProducerInput
	for i := range producers {
		p := activities.ProducerInput{JobID: dep.Job.JobID, WorkerID: workers[i].ID, Request: control.ProduceRequest{
			Topic: dep.Job.Topic, KafkaBrokers: dep.Job.KafkaBrokers, Generator: produce.SequentialGenerator,
			NumKeys: warmKeys, StartEvent: int64(i) * perProducer, MaxEvents: perProducer,
		}}
		must(t, acts.StartProducer(ctx, p))
		warm = append(warm, p)
	}
	in, err := acts.AwaitSinkRecords(ctx, activities.AwaitSinkInput{Deployment: dep, Want: warmKeys, TimeoutSecs: 180})
	must(t, err)
	if in.Distinct != warmKeys || in.Duplicates != 0 {
		t.Fatalf("warm-up: sink has %d distinct records (%d duplicates), want %d", in.Distinct, in.Duplicates, warmKeys)
	}
	for _, p := range warm {
		rep, err := acts.StopProducer(ctx, p)
		must(t, err)
		if rep.Acked != perProducer {
			t.Fatalf("warm-up producer on %s acked %d, want %d", p.WorkerID, rep.Acked, perProducer)
		}
	}
	// One new key per warm-up record: every key counted once.
	warmOracle := map[string]uint64{}
	for i := range warmKeys {
		warmOracle[produce.KeyName(i)] = 1
	}
	assertMatchesOracle(t, sinkStatus(t, ctx, acts, dep, true).KeyValues, warmOracle, warmKeys)

	m, err := acts.SnapshotState(ctx, activities.SnapshotInput{Deployment: dep, Dir: snapDir, NumEvents: perProducer, Producers: producers, Generator: produce.SequentialGenerator})
	must(t, err)
	if len(m.Operators) != 1 || m.Operators[0].Operator != "counter" || m.Operators[0].Parallelism != 2 || len(m.Operators[0].Tasks) != 2 {
		t.Fatalf("manifest operators: %+v", m.Operators)
	}
	if m.Keys != warmKeys || m.Bytes == 0 || m.NumBuckets != buckets || len(m.Operators[0].BucketTask) != buckets {
		t.Fatalf("manifest: keys %d (want %d), bytes %d, NumBuckets %d, bucket table %d entries", m.Keys, warmKeys, m.Bytes, m.NumBuckets, len(m.Operators[0].BucketTask))
	}
	for _, ts := range m.Operators[0].Tasks {
		if !ts.Settled {
			t.Fatalf("task %s: snapshot taken before its store settled (waited %d ms)", ts.TaskID, ts.SettleMillis)
		}
		if !ts.Compacted {
			t.Fatalf("task %s: snapshot taken without compacting its store whole (%d ms spent)", ts.TaskID, ts.CompactMillis)
		}
	}
	if _, err := acts.SnapshotState(ctx, activities.SnapshotInput{Deployment: dep, Dir: snapDir, NumEvents: perProducer}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second snapshot into %s: err %v, want an 'already exists' error", snapDir, err)
	}
	must(t, acts.StopTasks(ctx, activities.TasksInput{Deployment: dep}))

	// A fresh cluster: shape mismatches are refused, naming both values.
	c2 := dptest.Start(t, dptest.Options{Workers: 3})
	for _, bad := range []struct {
		job              string
		parallelism, nb  int
		wantIn1, wantIn2 string
	}{
		{"bad-parallelism", 3, buckets, "counter parallelism 2", "counter parallelism 3"},
		{"bad-buckets", 2, 64, "NumBuckets 128", "NumBuckets 64"},
	} {
		bacts, _, bdep := warmJob(t, ctx, c2, bad.job, bad.parallelism, bad.nb)
		_, err := bacts.LoadSnapshot(ctx, activities.SnapshotInput{Deployment: bdep, Dir: snapDir})
		if err == nil || !strings.Contains(err.Error(), bad.wantIn1) || !strings.Contains(err.Error(), bad.wantIn2) {
			t.Fatalf("%s: load error %v, want one naming %q and %q", bad.job, err, bad.wantIn1, bad.wantIn2)
		}
		must(t, bacts.StopTasks(ctx, activities.TasksInput{Deployment: bdep}))
	}

	assertRemoteLoad(t, ctx, c2, snapDir, buckets, warmKeys)

	acts, workers, dep = warmJob(t, ctx, c2, "measure", 2, buckets)
	loaded, err := acts.LoadSnapshot(ctx, activities.SnapshotInput{Deployment: dep, Dir: snapDir})
	must(t, err)
	if loaded.Keys != warmKeys {
		t.Fatalf("loaded manifest has %d keys, want %d", loaded.Keys, warmKeys)
	}
	must(t, acts.StartTasks(ctx, activities.TasksInput{Deployment: dep}))
	dep = reconfigure(t, acts, workflows.ReconfigureLazy, dep, workers, "measure-r1", 4)
	kltEntries := 0
	for _, st := range counterStatus(t, ctx, acts, dep) {
		kltEntries += st.KLTSize
	}
	if kltEntries < warmKeys*4/10 || kltEntries > warmKeys*6/10 {
		t.Fatalf("key lookup tables hold %d entries after scale-out, want about %d (half of the loaded keys)", kltEntries, warmKeys/2)
	}

	// Measured input resumes the sequence at the snapshot's key count.
	resume := int64(loaded.Keys)
	meas := activities.ProducerInput{JobID: dep.Job.JobID, WorkerID: workers[0].ID, Request: control.ProduceRequest{
		Topic: dep.Job.Topic, KafkaBrokers: dep.Job.KafkaBrokers, Generator: produce.SequentialGenerator,
		NumKeys: activeKeys, StartEvent: resume, MaxEvents: measured,
	}}
	must(t, acts.StartProducer(ctx, meas))
	waitForSinkWithin(t, ctx, acts, dep, measured, 3*time.Minute)
	rep, err := acts.StopProducer(ctx, meas)
	must(t, err)
	ends, err := acts.EndOffsets(ctx, dep.Job)
	must(t, err)
	_, err = acts.FinishAndDrain(ctx, activities.DrainInput{Deployment: dep, BarrierID: "measure-eos", EndOffsets: ends, TimeoutSecs: 60})
	must(t, err)
	counts, err := acts.CollectSinkCounts(ctx, dep)
	must(t, err)
	if rep.Acked != measured || counts.Distinct != measured || counts.Duplicates != 0 {
		t.Fatalf("measured: producer acked %d, sink distinct %d duplicates %d; want %d, 0 duplicates", rep.Acked, counts.Distinct, counts.Duplicates, measured)
	}

	// Oracle: the warm-up's one record per key plus the measured records.
	oracle := map[string]uint64{}
	for n := resume; n < resume+measured; n++ {
		key := produce.KeyName(int(n % activeKeys))
		if oracle[key] == 0 {
			oracle[key] = 1 // its warm-up record
		}
		oracle[key]++
	}
	assertMatchesOracle(t, sinkStatus(t, ctx, acts, dep, true).KeyValues, oracle, measured)

	moved := movedBuckets(dep)
	var want, total uint64
	for i := range warmKeys {
		key := produce.KeyName(i)
		if !moved[statesvc.BucketOf([]byte(key), buckets)] {
			continue
		}
		total += uint64(len(key) + valueBytes)
		if i < activeKeys {
			want += uint64(len(key) + valueBytes)
		}
	}
	var got uint64
	for _, st := range counterStatus(t, ctx, acts, dep) {
		got += st.BytesMoved
	}
	t.Logf("warm-up %d keys, snapshot %d bytes; bytes migrated %d = active moved state %d of %d moved warm state", m.Keys, m.Bytes, got, want, total)
	if got != want {
		t.Fatalf("fetch-on-demand migrated %d bytes, want exactly the active keys' moved state %d (moved warm state %d)", got, want, total)
	}
	must(t, acts.StopTasks(ctx, activities.TasksInput{Deployment: dep}))
}

// assertRemoteLoad loads the snapshot into a job whose state is in a real
// remote state server (the remote protocol's backend, which has no
// directory to restore a checkpoint into) and reads every warm key's count
// back from the job's namespace there.
func assertRemoteLoad(t *testing.T, ctx context.Context, c *dptest.Cluster, snapDir string, buckets, warmKeys int) {
	t.Helper()
	srv, err := statesvc.NewServer(statesvc.ServerOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	must(t, err)
	defer srv.Close()
	const job = "remote-load"
	acts, _, dep := warmJobOn(t, ctx, c, job, 2, buckets, statesvc.BackendRemotePebble, map[string]string{control.ParamRemotePebbleAddrs: srv.Addr()})
	loaded, err := acts.LoadSnapshot(ctx, activities.SnapshotInput{Deployment: dep, Dir: snapDir})
	must(t, err)
	must(t, acts.StopTasks(ctx, activities.TasksInput{Deployment: dep}))
	if loaded.Keys != uint64(warmKeys) {
		t.Fatalf("remote load: manifest has %d keys, want %d", loaded.Keys, warmKeys)
	}
	r, err := statesvc.OpenRemote([]string{srv.Addr()}, statesvc.RemoteOptions{Namespace: job})
	must(t, err)
	defer r.Close()
	counts := map[string]uint64{}
	must(t, r.Scan(nil, nil, func(k, v []byte) bool {
		if len(v) != 8 {
			counts[string(k)] = 0 // not a count: reported below
			return true
		}
		counts[string(k)] = binary.LittleEndian.Uint64(v)
		return true
	}))
	if len(counts) != warmKeys {
		t.Fatalf("remote load: the job's namespace holds %d keys, want the %d warm keys", len(counts), warmKeys)
	}
	for k, n := range counts {
		if n != 1 {
			t.Fatalf("remote load: key %q counts %d, want its one warm-up record", k, n)
		}
	}
}
