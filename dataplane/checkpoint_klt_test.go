package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// kltCkptCluster is a counter operator of two tasks on one in-memory
// worker: count-0 an old owner still holding keys of count-1's buckets,
// count-1 a new owner whose lookup table names them. Count-1 owns the odd
// buckets and the moved ones (routing epoch 2 when there are any).
type kltCkptCluster struct {
	w     *Worker
	dep   control.Deployment
	tasks map[string]*task
}

const kltCkptBuckets = 16

func newKLTCkptCluster(t *testing.T, store string, moved ...int) *kltCkptCluster {
	t.Helper()
	q := NewQuery("klt-ckpt")
	q.Source("source", 1).KeyedStateful("count", []string{"count"}, func(r Record, st *State, emit Emit) error {
		var n uint64
		if v := st.Get("count", r.Key); len(v) == 8 {
			n = binary.LittleEndian.Uint64(v)
		}
		st.Put("count", r.Key, binary.LittleEndian.AppendUint64(nil, n+1))
		return nil
	}).Parallelism(2).SinkFunc("sink", func([]Record) error { return nil })
	ops, err := q.Build()
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: Options{ID: "w1", DataDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), tasks: map[string]*task{}, producers: map[string]*produce.Producer{}}
	job := control.JobSpec{JobID: "klt-ckpt", Operators: ops, NumBuckets: kltCkptBuckets, BatchSize: 100, StateBackend: "pebble",
		Params: map[string]string{control.ParamMigrationMode: control.ModeFetchOnDemand, control.ParamCheckpointStore: store}}
	dep := control.Deployment{Job: job, Epoch: 1}
	if len(moved) > 0 {
		dep.Epoch = 2
	}
	for _, op := range ops {
		for i := range max(1, op.Parallelism) {
			dep.Tasks = append(dep.Tasks, control.TaskRef{ID: control.TaskID(op.Name, i), Operator: op.Name, Index: i, WorkerID: "w1"})
		}
		table := make([]int, kltCkptBuckets)
		if op.Name == "count" {
			for b := range table {
				table[b] = b % 2 // odd buckets: count-1
			}
			for _, b := range moved {
				table[b] = 1
			}
		}
		dep.Routing = append(dep.Routing, control.RoutingTable{Operator: op.Name, Epoch: dep.Epoch, Buckets: table})
	}
	c := &kltCkptCluster{w: w, dep: dep, tasks: createTasks(t, w, dep)}
	t.Cleanup(func() {
		for _, tk := range c.tasks {
			_ = tk.stop(context.Background())
		}
	})
	return c
}

// part writes task id's part of checkpoint cp as at its barrier.
func (c *kltCkptCluster) part(t *testing.T, id, cp string) control.CheckpointTaskAck {
	t.Helper()
	tk := c.tasks[id]
	view := tk.view.Load()
	ack := tk.writeCheckpointPart(context.Background(), view, cp)
	tk.commitCheckpointAck(context.Background(), view, cp, ack)
	return ack
}

// count processes one record of key on count-1.
func (c *kltCkptCluster) count(t *testing.T, key string) {
	t.Helper()
	tk := c.tasks["count-1"]
	f := &wire.Frame{Kind: wire.FrameData, JobID: c.dep.Job.JobID, FromTask: "source-0", ToTask: tk.id, Records: []Record{{Key: []byte(key)}}}
	if err := tk.handleSettled(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

// restored loads checkpoint cp into fresh tasks and returns each key's
// count and the task holding it.
func restoredCounts(t *testing.T, store, cp string, moved ...int) (map[string]uint64, map[string]string) {
	t.Helper()
	c := newKLTCkptCluster(t, store, moved...)
	ids := []string{"count-0", "count-1"}
	if _, err := c.w.restoreCheckpoint(context.Background(), c.dep.Job.JobID, control.CheckpointRequest{CheckpointID: cp, TaskIDs: ids}); err != nil {
		t.Fatalf("restore %s: %v", cp, err)
	}
	counts, where := map[string]uint64{}, map[string]string{}
	for _, id := range ids {
		ks := c.tasks[id].keyed
		if n := ks.klt.Len(); n != 0 {
			t.Errorf("%s restored from %s with %d lookup entries, want 0 (resolved at restore)", id, cp, n)
		}
		prefix := statesvc.OperatorPrefix("count")
		if err := ks.store.Scan(prefix, statesvc.PrefixEnd(prefix), func(k, v []byte) bool {
			_, _, _, user, err := statesvc.ParseStateKey(k)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := where[string(user)]; dup {
				t.Errorf("checkpoint %s: key %s restored into %s and %s", cp, user, other, id)
			}
			counts[string(user)], where[string(user)] = binary.LittleEndian.Uint64(v), id
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	return counts, where
}

// keysInBuckets returns n distinct keys whose buckets have the parity odd.
func keysInBuckets(n int, odd bool) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("key-%d", i)
		if (statesvc.BucketOf([]byte(k), kltCkptBuckets)%2 == 1) == odd {
			out = append(out, k)
		}
	}
	return out
}

// TestCheckpointWithKeysStillRemote takes checkpoints while count-1's
// lookup table still names keys on count-0, in both orders of the two
// parts, and with a fetch between them: the parts are written (no
// refusal), and restoring each checkpoint puts every key into exactly
// its owner with its count at the cut — a key fetched after the new
// owner's part and before the old owner's (deleted from the old owner's
// store) comes from the old owner's served log; a key fetched before the
// new owner's part keeps the new owner's value though the old owner's
// part still has a stale copy and the table (a duplicate entry, as a hash
// collision leaves) still names it; a key never fetched comes from the
// old owner's store.
func TestCheckpointWithKeysStillRemote(t *testing.T) {
	store := t.TempDir()
	c := newKLTCkptCluster(t, store)
	moved := keysInBuckets(4, true) // count-1's buckets, values on count-0
	a, b, cKey, d := moved[0], moved[1], moved[2], moved[3]
	own := keysInBuckets(1, false)[0] // count-0's own key
	old, nw := c.tasks["count-0"].keyed, c.tasks["count-1"].keyed
	var kvs []statesvc.KV
	for i, k := range append(moved, own) {
		kvs = append(kvs, statesvc.KV{Key: old.stateKey("count", []byte(k)), Value: binary.LittleEndian.AppendUint64(nil, uint64(10*(i+1)))})
	}
	if err := old.store.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}
	nw.owners.Store("count-0", control.TaskRef{ID: "count-0", WorkerID: "w1"})
	for _, k := range moved {
		nw.klt.Add(statesvc.BucketOf([]byte(k), kltCkptBuckets), []byte(k), "count-0")
	}
	nw.klt.Add(statesvc.BucketOf([]byte(b), kltCkptBuckets), []byte(b), "count-0") // b listed twice

	c.count(t, cKey) // fetched before any checkpoint: 30 → 31
	// Checkpoint 1: the new owner's part first, then a fetch, then the old owner's.
	if ack := c.part(t, "count-1", "cp-000001"); ack.Error != "" {
		t.Fatalf("new owner's part refused with keys still remote: %s", ack.Error)
	}
	c.count(t, a) // after count-1's part: 10 → 11, not in checkpoint 1
	if n := old.served.len(); n != 1 {
		t.Fatalf("old owner's served log holds %d values after serving a task past its checkpoint, want 1", n)
	}
	if ack := c.part(t, "count-0", "cp-000001"); ack.Error != "" {
		t.Fatalf("old owner's part refused: %s", ack.Error)
	}
	if n := old.served.len(); n != 0 {
		t.Fatalf("old owner's served log holds %d values after its part, want 0", n)
	}
	// Checkpoint 2: the old owner's part first, then a fetch, then the new owner's.
	if ack := c.part(t, "count-0", "cp-000002"); ack.Error != "" {
		t.Fatalf("old owner's part refused: %s", ack.Error)
	}
	c.count(t, b) // 20 → 21, in count-1's part; count-0's part keeps the stale 20
	if n := old.served.len(); n != 0 {
		t.Fatalf("old owner's served log holds %d values served to a task behind it, want 0", n)
	}
	if ack := c.part(t, "count-1", "cp-000002"); ack.Error != "" {
		t.Fatalf("new owner's part refused: %s", ack.Error)
	}
	if _, listed := nw.klt.Lookup([]byte(b)); !listed {
		t.Fatalf("the duplicate entry of %s is gone; the test no longer covers a stale copy the table still names", b)
	}

	for _, tc := range []struct {
		cp   string
		want map[string]uint64
	}{
		{"cp-000001", map[string]uint64{a: 10, b: 20, cKey: 31, d: 40, own: 50}},
		{"cp-000002", map[string]uint64{a: 11, b: 21, cKey: 31, d: 40, own: 50}},
	} {
		got, where := restoredCounts(t, store, tc.cp)
		if !maps.Equal(got, tc.want) {
			t.Errorf("restored %s: %v, want %v", tc.cp, got, tc.want)
		}
		for k, id := range where {
			if owner := fmt.Sprintf("count-%d", statesvc.BucketOf([]byte(k), kltCkptBuckets)%2); id != owner {
				t.Errorf("restored %s: key %s in %s, its bucket's owner is %s", tc.cp, k, id, owner)
			}
		}
	}
}

// TestCheckpointRefusedForRemovedOwner: lookup entries naming a task that
// is no longer one of the operator's (a removed task handing its keys
// over) keep refusing the part — that task writes none to restore from.
func TestCheckpointRefusedForRemovedOwner(t *testing.T) {
	c := newKLTCkptCluster(t, t.TempDir())
	nw := c.tasks["count-1"].keyed
	k := keysInBuckets(1, true)[0]
	nw.owners.Store("count-2", control.TaskRef{ID: "count-2", WorkerID: "w1"})
	nw.klt.Add(statesvc.BucketOf([]byte(k), kltCkptBuckets), []byte(k), "count-2")
	ack := c.part(t, "count-1", "cp-000001")
	if !strings.Contains(ack.Error, "count-2, no longer a task of count") {
		t.Fatalf("part with entries of a removed owner: error %q, want a refusal naming count-2", ack.Error)
	}
}
