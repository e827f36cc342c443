package dataplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
)

// txnSinkRig is a Kafka sink topic on kfake with a checkpoint store, and
// the incarnations of one transactional sink task writing to it.
type txnSinkRig struct {
	t       *testing.T
	ctx     context.Context
	brokers []string
	store   checkpoint.Store
	topic   string
	job     control.JobSpec
}

// txnTestBrokersEnv names real brokers (comma-separated) to run the
// transactional sink tests against instead of kfake, with a fresh topic
// and job id each: the broker's transaction coordinator is what decides
// whether a commit retried on restore succeeds.
const txnTestBrokersEnv = "KOALA_TEST_KAFKA_BROKERS"

func newTxnSinkRig(t *testing.T) *txnSinkRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	jobID, topic := "j", "out"
	var brokers []string
	if env := os.Getenv(txnTestBrokersEnv); env != "" {
		brokers = strings.Split(env, ",")
		jobID = fmt.Sprintf("j%d", time.Now().UnixNano())
		topic = "out-" + jobID
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			t.Fatal(err)
		}
		_, err = kadm.NewClient(cl).CreateTopic(ctx, 4, 1, nil, topic)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
	} else {
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kc.Close)
		brokers = kc.ListenAddrs()
	}
	loc := filepath.Join(t.TempDir(), "checkpoints")
	store, err := checkpoint.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	return &txnSinkRig{t: t, ctx: ctx, brokers: brokers, store: store, topic: topic,
		job: control.JobSpec{JobID: jobID, KafkaBrokers: brokers, Params: map[string]string{control.ParamCheckpointStore: loc, control.ParamKafkaSinkTopic: topic}}}
}

// incarnation starts task sink-0 (again, after a "crash" of the previous
// one, which is simply abandoned).
func (r *txnSinkRig) incarnation() *kafkaSink {
	r.t.Helper()
	dead, err := kafkaio.NewDeadLetters(r.job, "sink", "sink-0", nil, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	op, err := NewKafkaSinkFactory(r.topic)(OperatorContext{Job: r.job, Spec: control.OperatorSpec{Name: "sink"}, TaskID: "sink-0", DeadLetters: dead})
	if err != nil {
		r.t.Fatal(err)
	}
	k := op.(*kafkaSink)
	if !k.transactional() {
		r.t.Fatal("a sink of a job with a checkpoint store is not transactional")
	}
	r.t.Cleanup(func() { k.Close() })
	return k
}

// write hands the sink records name0..name<n-1> (7 keys) as one batch.
func (r *txnSinkRig) write(k *kafkaSink, name string, n int) {
	r.t.Helper()
	in := make([]Record, n)
	for i := range in {
		in[i] = Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "%s%d", name, i), EventTime: time.Now().UnixNano()}
	}
	if err := k.ProcessBatch(in, nil); err != nil {
		r.t.Fatal(err)
	}
}

// barrier pre-commits checkpoint id and returns the task's part directory.
func (r *txnSinkRig) barrier(k *kafkaSink, id string) string {
	r.t.Helper()
	dir, err := r.store.TaskDir(r.job.JobID, id, "sink-0")
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := k.preCommit(r.ctx, id, dir); err != nil {
		r.t.Fatal(err)
	}
	return dir
}

// complete writes checkpoint id's manifest (the controller's step 3).
func (r *txnSinkRig) complete(id string) {
	r.t.Helper()
	if err := r.store.Complete(r.ctx, checkpoint.Manifest{JobID: r.job.JobID, CheckpointID: id}); err != nil {
		r.t.Fatal(err)
	}
}

// visible reads the topic as a read_committed consumer up to its last
// stable offsets and returns, per value prefix, how often each record
// value is visible.
func (r *txnSinkRig) visible() map[string]int {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.ConsumeTopics(r.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	lso, err := kadm.NewClient(cl).ListCommittedOffsets(r.ctx, r.topic)
	if err != nil {
		r.t.Fatal(err)
	}
	want := map[int32]int64{}
	lso.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	next := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	out := map[string]int{}
	for !done() {
		fs := cl.PollFetches(r.ctx)
		if r.ctx.Err() != nil {
			r.t.Fatalf("read_committed: %v (at %v of %v)", r.ctx.Err(), next, want)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			next[rec.Partition] = rec.Offset + 1
			if !rec.Attrs.IsControl() && rec.Offset < want[rec.Partition] {
				out[string(rec.Value)]++
			}
		})
	}
	return out
}

// expect checks that exactly the records of the named batches (name, n)
// are visible, each once.
func (r *txnSinkRig) expect(step string, batches ...any) {
	r.t.Helper()
	want := map[string]int{}
	for i := 0; i < len(batches); i += 2 {
		name, n := batches[i].(string), batches[i+1].(int)
		for j := range n {
			want[fmt.Sprintf("%s%d", name, j)] = 1
		}
	}
	got := r.visible()
	var diff []string
	for v, c := range got {
		if want[v] != c {
			diff = append(diff, fmt.Sprintf("%s ×%d", v, c))
		}
	}
	for v := range want {
		if got[v] == 0 {
			diff = append(diff, v+" missing")
		}
	}
	slices.Sort(diff)
	if len(diff) > 0 {
		r.t.Fatalf("%s: read_committed sees %d records, want %d; wrong: %v", step, len(got), len(want), diff[:min(8, len(diff))])
	}
}

// TestKafkaTxnSinkExactlyOnceAcrossRecovery: records become visible to
// read_committed only when the checkpoint after them completed; after a
// crash and a restore from the latest completed checkpoint, the records
// written after it (in a transaction of the dead incarnation) never
// become visible, those it covers are visible once, and the replay makes
// every record visible exactly once.
func TestKafkaTxnSinkExactlyOnceAcrossRecovery(t *testing.T) {
	r := newTxnSinkRig(t)
	s1 := r.incarnation()
	r.write(s1, "a", 40)
	r.expect("open transaction")
	r.barrier(s1, "cp-000001")
	r.write(s1, "b", 30) // held until cp-000001's outcome
	r.expect("pre-committed, checkpoint running")
	r.complete("cp-000001")
	if err := s1.commitCheckpoint(r.ctx, "cp-000001"); err != nil {
		t.Fatal(err)
	}
	r.expect("cp-000001 committed", "a", 40)
	r.write(s1, "c", 30)
	dir2 := r.barrier(s1, "cp-000002")
	r.complete("cp-000002")
	if err := s1.commitCheckpoint(r.ctx, "cp-000002"); err != nil {
		t.Fatal(err)
	}
	r.expect("cp-000002 committed", "a", 40, "b", 30, "c", 30)
	// After the latest completed checkpoint: d and e reach Kafka in a
	// transaction, pre-committed for a checkpoint that never completes;
	// f is held. Then the worker dies.
	r.write(s1, "d", 30)
	r.write(s1, "e", 30)
	r.barrier(s1, "cp-000003")
	r.write(s1, "f", 30)

	// Recovery from cp-000002: its transaction was already committed (the
	// retried commit must succeed), the dead incarnation's is aborted.
	s2 := r.incarnation()
	began := time.Now()
	if err := s2.restoreCheckpoint(r.ctx, dir2); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore (commit retried, both ids fenced) took %s", time.Since(began).Round(time.Millisecond))
	r.expect("restored from cp-000002", "a", 40, "b", 30, "c", 30)
	r.write(s2, "d", 30) // the replay of the input after cp-000002
	r.write(s2, "e", 30)
	r.write(s2, "f", 30)
	r.expect("replaying", "a", 40, "b", 30, "c", 30)
	if err := s2.finishInput(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.expect("end of input", "a", 40, "b", 30, "c", 30, "d", 30, "e", 30, "f", 30)

	// The dead incarnation is fenced: it cannot commit any more.
	if err := s1.commitCheckpoint(r.ctx, "cp-000003"); err == nil {
		t.Fatal("the fenced incarnation committed its transaction")
	}
	r.expect("after the fenced commit", "a", 40, "b", 30, "c", 30, "d", 30, "e", 30, "f", 30)
}

// TestKafkaTxnSinkRecommitsOnRestore: the checkpoint completed but the
// worker died before the sink heard of it; the restored task commits the
// checkpoint's transaction itself.
func TestKafkaTxnSinkRecommitsOnRestore(t *testing.T) {
	r := newTxnSinkRig(t)
	s1 := r.incarnation()
	r.write(s1, "a", 50)
	dir := r.barrier(s1, "cp-000001")
	r.write(s1, "b", 20)
	r.complete("cp-000001")
	r.expect("completed, not reported")

	s2 := r.incarnation()
	if err := s2.restoreCheckpoint(r.ctx, dir); err != nil {
		t.Fatal(err)
	}
	r.expect("restored from cp-000001", "a", 50)
	r.write(s2, "b", 20)
	if err := s2.finishInput(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.expect("end of input", "a", 50, "b", 20)
}

// TestKafkaTxnSinkSettlesFromTheStore: a failed checkpoint's records join
// the next transaction; a completed checkpoint whose report was lost is
// committed at the next barrier.
func TestKafkaTxnSinkSettlesFromTheStore(t *testing.T) {
	r := newTxnSinkRig(t)
	s := r.incarnation()
	r.write(s, "a", 20)
	r.barrier(s, "cp-000001")
	r.write(s, "b", 20)
	if err := s.abortCheckpoint(r.ctx, "cp-000001"); err != nil { // failed: no manifest
		t.Fatal(err)
	}
	r.write(s, "c", 20)
	r.expect("cp-000001 failed")
	r.barrier(s, "cp-000002")
	r.write(s, "d", 20)
	r.complete("cp-000002") // its report is lost
	r.expect("cp-000002 completed, not reported")
	r.barrier(s, "cp-000003")
	r.expect("settled at the next barrier", "a", 20, "b", 20, "c", 20)
	r.complete("cp-000003")
	if err := s.commitCheckpoint(r.ctx, "cp-000003"); err != nil {
		t.Fatal(err)
	}
	r.expect("cp-000003 committed", "a", 20, "b", 20, "c", 20, "d", 20)
}
