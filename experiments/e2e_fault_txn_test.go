package experiments_test

// Fault test of a recovery during a lazy migration with a transactional
// Kafka sink: a worker with counter tasks is kill -9'd after a fetch-on-demand
// scale-out swapped its routes and while keys are still to fetch; a
// read_committed consumer of the sink's topic must see every count of every
// key exactly once.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/deploy/local"
	"koala/workflows"
)

// TestFaultWorkerLostMidMigrationKafkaSink runs the keyed counter through
// `koala run` with its sink replaced by the Kafka sink (SinkKind "kafka",
// transactional because the job takes a checkpoint every 2 s), scales the
// counter out 2 → 4 with the lazy protocol in fetch-on-demand mode, and,
// once the reconfiguration swapped its routes, a checkpoint completed after
// the swap and keys are still in a key lookup table, kills with kill -9 a
// worker that hosts counter tasks but not the producer. It checks that
//   - the run completes (the CLI exits 0) with lost 0, duplicated 0 and one
//     recovery of that worker;
//   - a read_committed consumer of the sink's topic reads, for every key,
//     the counts 1..n once each, n being the key's count in the input topic
//     (read back independently), and no key the input lacks.
func TestFaultWorkerLostMidMigrationKafkaSink(t *testing.T) {
	cfg := sharedStack(t)
	ch := stackMetrics(t, cfg)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	outTopic := fmt.Sprintf("koala-e2e-txn-out-%d", time.Now().UnixNano())
	createTopic(ctx, t, cfg.KafkaBrokers(), outTopic, 4)
	// Many keys at a modest rate: most keys of the moved buckets are not
	// seen again for a while, so the lookup tables stay non-empty.
	path := faultConfig(t, cfg, "fault_lazy_counter.json", map[string]any{
		"TotalRuntimeSeconds": 40, "CheckpointIntervalSeconds": 2, "trigger": 6,
		"LazyByKeyCancellingTaskMigrationMode": "fetch-on-demand",
		"RatePerSecond":                        2000, "NumKeys": 50000,
		"SinkKind": "kafka", "KafkaSinkTopic": outTopic,
	})
	id := fmt.Sprintf("e2e-fault-txn-%d", time.Now().UnixNano())
	jobID := workflows.JobIDFor(id)
	childID := jobID + "-reconfig-1"
	tc := temporalClient(ctx, t, cfg)
	nc, err := nats.Connect(cfg.NATSURL(), nats.Name("e2e-fault-txn-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cli := startRun(ctx, t, cfg, path, id)

	var producer string
	if err := poll(ctx, 90*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		producer, err = producerWorker(ctx, tc, id)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = tc.TerminateWorkflow(ctx, id, "", "fault test failed")
		}
	})

	// The reconfiguration swapped its routes.
	if err := poll(ctx, 90*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
		done, err := completedActivities(ctx, tc, childID)
		if err != nil {
			return err
		}
		if !slices.Contains(done, "SwapRoutes") {
			return fmt.Errorf("%s has not swapped its routes yet (completed %v)", childID, done)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	swappedAt := time.Now()
	// The first checkpoint that starts after the swap: the recovery must
	// restore the new deployment with its lookup tables, not redo the
	// reconfiguration.
	started := 0
	for {
		if _, err := tc.DescribeWorkflowExecution(ctx, jobID+"-"+checkpoint.ID(started+1), ""); err != nil {
			break
		}
		started++
	}
	afterSwap := checkpoint.ID(started + 1)
	// That checkpoint completed, keys still to fetch. (The kill must come
	// well before the run drains: a worker lost while draining fails the
	// run.)
	var victim string
	var klt map[string]int
	var hosts map[string][]string
	if err := poll(ctx, 60*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
		n, err := checkpointRows(ctx, ch, jobID, func(r metrics.CheckpointRow) bool { return r.Kind == "checkpoint" && r.CheckpointID == afterSwap })
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("checkpoint %s of %s, the first after the swap, has not completed", afterSwap, jobID)
		}
		hosts, klt, err = counterKLT(ctx, nc, cfg.WorkerIDs(), jobID)
		if err != nil {
			return err
		}
		victim = ""
		total := 0
		for w, tasks := range hosts {
			for _, task := range tasks {
				total += klt[task]
				if w != producer && strings.HasPrefix(task, "counter-") && (victim == "" || klt[task] > 0) {
					victim = w
				}
			}
		}
		if total == 0 {
			return fmt.Errorf("no counter task of %s has keys left to fetch: %v", jobID, klt)
		}
		if victim == "" {
			return fmt.Errorf("no worker but the producer's (%s) hosts a counter task of %s: %v", producer, jobID, hosts)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	guardRun(t, cfg, tc, id, "worker-"+victim)
	killedAt := time.Now()
	pid, err := local.KillService(cfg, "worker-"+victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f s: killed worker %s (pid %d, hosts %v; producer on %s) %.1f s after the swap, %s completed; keys to fetch per task %v",
		killedAt.Sub(begin).Seconds(), victim, pid, hosts[victim], producer, killedAt.Sub(swappedAt).Seconds(), afterSwap, klt)

	var res cliResult
	select {
	case res = <-cli:
	case <-ctx.Done():
		t.Fatalf("koala run did not end: %v", ctx.Err())
	}
	t.Logf("koala run: exit %d after %s\nstdout:\n%s\nstderr:\n%s", res.exitCode, res.took.Round(time.Millisecond), res.stdout, strings.TrimSpace(res.stderr))
	if res.exitCode != 0 {
		t.Fatalf("koala run exited %d after a worker loss during a migration, want 0 (recovered)", res.exitCode)
	}
	var out workflows.ExperimentResult
	if err := tc.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		t.Fatalf("result of %s: %v", id, err)
	}
	t.Cleanup(func() { removeCheckpoints(t, out.Final.Job) })
	t.Logf("result: produced %d (failed %d), sink received %d distinct %d duplicates %d, lost %d duplicated %d",
		out.Produced, out.ProduceFailed, out.Sink.Received, out.Sink.Distinct, out.Sink.Duplicates, out.Lost, out.Duplicated)
	checkExactness(t, out)
	if len(out.Reconfigs) != 1 {
		t.Errorf("%d reconfigurations in the result, want 1", len(out.Reconfigs))
	}
	if out.Checkpoints == nil || len(out.Checkpoints.Recoveries) != 1 {
		t.Fatalf("checkpoints in the result: %+v, want one recovery", out.Checkpoints)
	}
	rec := out.Checkpoints.Recoveries[0]
	t.Logf("checkpoints: %d completed, %d failed, mean %.1f ms; recovery of %s from %s at %.1f s took %.0f ms, moved %v",
		out.Checkpoints.Completed, out.Checkpoints.Failed, out.Checkpoints.MeanMillis,
		rec.Lost, rec.CheckpointID, rec.AtSec, rec.Millis, rec.Moved)
	if rec.Lost != victim || rec.CheckpointID < afterSwap || len(rec.Moved) == 0 {
		t.Errorf("recovery %+v, want worker %s lost, a checkpoint from %s on (taken after the swap) and its tasks moved", rec, victim, afterSwap)
	}
	for _, op := range out.Final.Job.Operators {
		if op.Name == "sink" && op.Kind != control.KindKafkaSink {
			t.Errorf("operator sink is a %q, want %q", op.Kind, control.KindKafkaSink)
		}
	}

	// Every count of every key once, read committed, against the input.
	oracle, n := topicKeyCounts(ctx, t, cfg.KafkaBrokers(), out.Topic)
	if n != out.Produced {
		t.Errorf("the input topic holds %d records, the producers acked %d", n, out.Produced)
	}
	got, read := committedCounts(ctx, t, cfg.KafkaBrokers(), outTopic)
	var wrong []string
	for k, want := range oracle {
		counts := got[k]
		slices.Sort(counts)
		ok := uint64(len(counts)) == want
		for i := 0; ok && i < len(counts); i++ {
			ok = counts[i] == uint64(i+1)
		}
		if !ok {
			wrong = append(wrong, fmt.Sprintf("%s: %v, want 1..%d", k, counts[:min(8, len(counts))], want))
		}
	}
	for k, counts := range got {
		if _, ok := oracle[k]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s: %v, not in the input", k, counts[:min(8, len(counts))]))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Errorf("%d of %d keys' committed outputs differ from 1..count, e.g. %v", len(wrong), len(oracle), wrong[:min(5, len(wrong))])
	}
	t.Logf("sink topic %s: %d committed records of %d keys; input %d records of %d keys", outTopic, read, len(got), n, len(oracle))
	t.Logf("TestFaultWorkerLostMidMigrationKafkaSink took %s (kill at %.1f s, run ended %.1f s after it)",
		time.Since(begin).Round(time.Millisecond), killedAt.Sub(begin).Seconds(), time.Since(killedAt).Seconds())
}

// startRun starts `koala run path --id id` against the stack; the channel
// yields its result when it exits.
func startRun(ctx context.Context, t *testing.T, cfg local.Config, path, id string) <-chan cliResult {
	t.Helper()
	cli := make(chan cliResult, 1)
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(ccancel)
	cmd := exec.CommandContext(cctx, koalaBinary(t), "run", path,
		"--temporal", cfg.TemporalAddr(), "--kafka", strings.Join(cfg.KafkaBrokers(), ","),
		"--results", t.TempDir(), "--id", id, "--ui", cfg.TemporalUIURL())
	cmd.Env = append(cleanEnv(), cfg.Env()...)
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		start := time.Now()
		err := cmd.Wait()
		res := cliResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.exitCode = ee.ExitCode()
		} else if err != nil {
			res.exitCode = -1
			res.stderr += "\n" + err.Error()
		}
		cli <- res
	}()
	return cli
}

// createTopic creates topic with partitions partitions and deletes it when
// the test ends.
func createTopic(ctx context.Context, t *testing.T, brokers []string, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		cl.Close()
		t.Fatalf("create topic %s: %v", topic, err)
	}
	t.Cleanup(func() {
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopics(ctx, topic); err != nil {
			t.Logf("delete topic %s: %v", topic, err)
		}
	})
}

// counterKLT asks every worker for the status of its tasks of job and
// returns the tasks per worker and each counter task's lookup table size
// (entries of keys still to fetch).
func counterKLT(ctx context.Context, nc *nats.Conn, workers []string, jobID string) (map[string][]string, map[string]int, error) {
	data, err := control.NewEnvelope(jobID, "", control.TasksRequest{})
	if err != nil {
		return nil, nil, err
	}
	hosts, klt := map[string][]string{}, map[string]int{}
	for _, w := range workers {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := nc.RequestWithContext(rctx, control.WorkerSubject(w, control.VerbStatus), data)
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("status of worker %s: %w", w, err)
		}
		var r control.Reply
		if err := json.Unmarshal(msg.Data, &r); err != nil {
			return nil, nil, fmt.Errorf("status of worker %s: %w", w, err)
		}
		if r.Error != "" {
			return nil, nil, fmt.Errorf("status of worker %s: %s", w, r.Error)
		}
		var st control.StatusReply
		if err := json.Unmarshal(r.Body, &st); err != nil {
			return nil, nil, fmt.Errorf("status of worker %s: %w", w, err)
		}
		for _, task := range st.Tasks {
			hosts[w] = append(hosts[w], task.TaskID)
			if task.Operator == "counter" {
				klt[task.TaskID] = task.KLTSize
			}
		}
	}
	return hosts, klt, nil
}

// committedCounts reads topic with a read_committed consumer and returns
// the 8-byte little-endian counts of each key and how many records it
// read. To know where the committed data ends it first writes a marker
// record to every partition outside any transaction: a read_committed
// consumer reaches a marker only past every transaction begun before it.
func committedCounts(ctx context.Context, t *testing.T, brokers []string, topic string) (map[string][]uint64, int) {
	t.Helper()
	const marker = "\x00end-of-test-marker"
	pr, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	parts, err := endOffsets(ctx, pr, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := range parts {
		if err := pr.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Key: []byte(marker)}).FirstErr(); err != nil {
			t.Fatalf("marker to %s/%d: %v", topic, p, err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string][]uint64{}
	n := 0
	seen := map[int32]bool{}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(seen) < len(parts) {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %s committed: %v (markers of %d of %d partitions seen)", topic, rctx.Err(), len(seen), len(parts))
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("read %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) == marker {
				seen[r.Partition] = true
				return
			}
			if len(r.Value) != 8 {
				t.Errorf("%s/%d@%d: key %q value of %d bytes, want an 8-byte count", topic, r.Partition, r.Offset, r.Key, len(r.Value))
				return
			}
			out[string(r.Key)] = append(out[string(r.Key)], binary.LittleEndian.Uint64(r.Value))
			n++
		})
	}
	return out, n
}
