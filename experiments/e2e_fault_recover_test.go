package experiments_test

// Fault test with checkpoints: a worker with counter tasks is kill -9'd
// after a checkpoint completed; the run must recover from the checkpoint
// and complete exactly (0 lost, 0 duplicated, per-key counts equal to the
// input's).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"koala/activities"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/deploy/local"
	"koala/workflows"
)

// TestFaultWorkerLostRecovers runs a keyed counter through `koala run`
// with a checkpoint every 2 s and no reconfiguration, waits until a
// checkpoint completed (koala.checkpoint_events), kills with kill -9 a
// worker that hosts counter tasks but not the producer, and checks that
//   - the run completes (the CLI exits 0) with lost 0, duplicated 0 and
//     every produced record in the sink;
//   - the result reports one recovery of that worker from a checkpoint;
//   - the first checkpoint's workflow ran every step, ending with the
//     report to the sinks (CommitCheckpoint);
//   - the sink's count per key equals the count of each key in the input
//     topic, read back independently;
//   - koala.checkpoint_events has a recovery row of the job.
//
// The killed worker is started again when the test ends.
func TestFaultWorkerLostRecovers(t *testing.T) {
	cfg := sharedStack(t)
	ch := stackMetrics(t, cfg)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	path := faultConfig(t, cfg, "fault_lazy_counter.json", map[string]any{
		"TotalRuntimeSeconds": 36, "CheckpointIntervalSeconds": 2, "Reconfigurations": []any{},
		"RatePerSecond": 2000, "NumKeys": 1000, "ReportSinkValues": true,
	})
	id := fmt.Sprintf("e2e-fault-recover-%d", time.Now().UnixNano())
	jobID := workflows.JobIDFor(id)
	tc := temporalClient(ctx, t, cfg)
	nc, err := nats.Connect(cfg.NATSURL(), nats.Name("e2e-fault-recover-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	cli := startRun(ctx, t, cfg, path, id)

	// The producer's worker, from the StartProducer step of the history.
	var producer string
	if err := poll(ctx, 90*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		producer, err = producerWorker(ctx, tc, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var victim string
	hosts, err := jobHosts(nc, jobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cfg.WorkerIDs() {
		if w != producer && slices.ContainsFunc(hosts[w], func(task string) bool { return strings.HasPrefix(task, "counter-") }) {
			victim = w
		}
	}
	if victim == "" {
		t.Fatalf("no worker but the producer's (%s) hosts a counter task of %s: %v", producer, jobID, hosts)
	}
	service := "worker-" + victim
	guardRun(t, cfg, tc, id, service)

	// A checkpoint completed.
	if err := poll(ctx, 60*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
		n, err := checkpointRows(ctx, ch, jobID, func(r metrics.CheckpointRow) bool { return r.Kind == "checkpoint" })
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no completed checkpoint of %s in koala.checkpoint_events", jobID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	pid, err := local.KillService(cfg, service)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: killed worker %s (pid %d, hosts %v; producer on %s) with kill -9", killedAt.Sub(begin).Seconds(), victim, pid, hosts[victim], producer)

	var res cliResult
	select {
	case res = <-cli:
	case <-ctx.Done():
		t.Fatalf("koala run did not end: %v", ctx.Err())
	}
	t.Logf("koala run: exit %d after %s\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.took.Round(time.Millisecond), res.stdout, strings.TrimSpace(res.stderr))
	if res.exitCode != 0 {
		t.Fatalf("koala run exited %d after a worker loss with a completed checkpoint, want 0 (recovered)", res.exitCode)
	}
	var out workflows.ExperimentResult
	if err := tc.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		t.Fatalf("result of %s: %v", id, err)
	}
	t.Cleanup(func() { removeCheckpoints(t, out.Final.Job) })
	t.Logf("result: produced %d (failed %d), sink received %d distinct %d duplicates %d, lost %d duplicated %d",
		out.Produced, out.ProduceFailed, out.Sink.Received, out.Sink.Distinct, out.Sink.Duplicates, out.Lost, out.Duplicated)
	checkExactness(t, out)
	if out.Checkpoints == nil || len(out.Checkpoints.Recoveries) != 1 {
		t.Fatalf("checkpoints in the result: %+v, want one recovery", out.Checkpoints)
	}
	rec := out.Checkpoints.Recoveries[0]
	t.Logf("checkpoints: %d completed, %d failed, mean %.1f ms, %.0f bytes; recovery of %s from %s at %.1f s took %.0f ms, moved %v",
		out.Checkpoints.Completed, out.Checkpoints.Failed, out.Checkpoints.MeanMillis, out.Checkpoints.MeanBytes,
		rec.Lost, rec.CheckpointID, rec.AtSec, rec.Millis, rec.Moved)
	killAt := killedAt.Sub(out.StartedAt).Seconds()
	t.Logf("kill at %.1f s of the job; recovery began %.1f s after it (the watch's allowed silence) and took %.0f ms; %d records produced",
		killAt, rec.AtSec-killAt, rec.Millis, out.Produced)
	if rec.Lost != victim || rec.CheckpointID == "" || len(rec.Moved) == 0 {
		t.Errorf("recovery %+v, want worker %s lost, a checkpoint and its tasks moved", rec, victim)
	}
	for _, task := range out.Final.Tasks {
		if task.WorkerID == victim {
			t.Errorf("task %s still placed on the lost worker %s", task.ID, victim)
		}
	}

	// The first checkpoint ran every step, the report to the sinks last.
	cpID := jobID + "-" + checkpoint.ID(1)
	steps, _ := workflowActivities(ctx, t, tc, cpID)
	var types []string
	for _, st := range steps {
		types = append(types, st.Type)
		if !st.Completed {
			t.Errorf("%s: step %s did not complete", cpID, st.Type)
		}
	}
	if want := []string{"InjectCheckpoint", "AwaitCheckpoint", "CompleteCheckpoint", "CommitCheckpoint"}; !slices.Equal(types, want) {
		t.Errorf("%s ran %v, want %v", cpID, types, want)
	}

	// Per-key counts against the input topic.
	oracle, n := topicKeyCounts(ctx, t, cfg.KafkaBrokers(), out.Topic)
	if n != out.Produced {
		t.Errorf("the input topic holds %d records, the producers acked %d", n, out.Produced)
	}
	// The sink's per-key values, reported in the result after the drain.
	got := map[string]uint64{}
	for task, vals := range out.Sink.Values {
		for k, v := range vals {
			if prev, dup := got[k]; dup {
				t.Errorf("key %s is in two sink tasks (%d and %d in %s)", k, prev, v, task)
			}
			got[k] = v
		}
	}
	var wrong []string
	for k, want := range oracle {
		if got[k] != want {
			wrong = append(wrong, fmt.Sprintf("%s: %d, want %d", k, got[k], want))
		}
	}
	for k := range got {
		if _, ok := oracle[k]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s: %d, not in the input", k, got[k]))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Errorf("%d of %d keys differ from the input's counts, e.g. %v", len(wrong), len(oracle), wrong[:min(5, len(wrong))])
	}
	t.Logf("sink: %d keys, every count equal to the input's (%d records)", len(got), n)

	// The recovery row.
	if err := poll(ctx, time.Minute, time.Second, func(ctx context.Context) error {
		n, err := checkpointRows(ctx, ch, jobID, func(r metrics.CheckpointRow) bool {
			return r.Kind == "recovery" && r.CheckpointID == rec.CheckpointID && r.Detail == "lost "+victim
		})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d recovery rows of %s from %s in koala.checkpoint_events, want 1", n, jobID, rec.CheckpointID)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	t.Logf("TestFaultWorkerLostRecovers took %s (kill at %.1f s, run ended %.1f s after it)",
		time.Since(begin).Round(time.Millisecond), killedAt.Sub(begin).Seconds(), time.Since(killedAt).Seconds())
}

// producerWorker reads the worker of the first StartProducer step of
// workflow id.
func producerWorker(ctx context.Context, c client.Client, id string) (string, error) {
	dc := converter.GetDefaultDataConverter()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		attr := ev.GetActivityTaskScheduledEventAttributes()
		if ev.GetEventType() != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED || attr.GetActivityType().GetName() != "StartProducer" {
			continue
		}
		var in activities.ProducerInput
		if p := attr.GetInput().GetPayloads(); len(p) == 1 {
			if err := dc.FromPayload(p[0], &in); err != nil {
				return "", fmt.Errorf("StartProducer input: %w", err)
			}
		}
		if in.WorkerID == "" {
			return "", fmt.Errorf("StartProducer of %s names no worker", id)
		}
		return in.WorkerID, nil
	}
	return "", fmt.Errorf("%s has not started its producer yet", id)
}

// topicKeyCounts reads topic from its start to its end offsets and counts
// the records of each key.
func topicKeyCounts(ctx context.Context, t *testing.T, brokers []string, topic string) (map[string]uint64, int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := endOffsets(ctx, cl, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	var n int64
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !done() {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %s: %v (at %v of %v)", topic, rctx.Err(), next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				out[string(r.Key)]++
				n++
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	return out, n
}

// removeCheckpoints deletes the job's checkpoints from its store.
func removeCheckpoints(t *testing.T, job control.JobSpec) {
	loc := strings.TrimPrefix(job.Params[control.ParamCheckpointStore], "file://")
	if loc == "" || job.JobID == "" {
		return
	}
	if err := os.RemoveAll(filepath.Join(loc, job.JobID)); err != nil {
		t.Errorf("remove checkpoints: %v", err)
	}
}

// endOffsets lists the end offset of each partition of topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	lo, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	var errs []error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			errs = append(errs, fmt.Errorf("end offset of %s/%d: %w", topic, o.Partition, o.Err))
			return
		}
		out[o.Partition] = o.Offset
	})
	return out, errors.Join(errs...)
}
