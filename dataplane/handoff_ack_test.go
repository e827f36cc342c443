package dataplane

import (
	"context"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
	"koala/dataplane/dptest/testnats"
	"koala/dataplane/wire"
	"koala/statesvc"
)

// handoffTo returns c's deployment with buckets moved to count-1 (routing
// epoch 2).
func (c *kltCkptCluster) handoffTo(moved []int) (dep control.Deployment) {
	dep = c.dep
	dep.Epoch = 2
	dep.Routing = slices.Clone(c.dep.Routing)
	for i, rt := range dep.Routing {
		rt.Epoch = 2
		if rt.Operator == "count" {
			rt.Buckets = slices.Clone(rt.Buckets)
			for _, b := range moved {
				rt.Buckets[b] = 1
			}
		}
		dep.Routing[i] = rt
	}
	return dep
}

// waitFrames polls task id's inbox until it holds n frames and returns them.
func (c *kltCkptCluster) waitFrames(t *testing.T, id string, n int) []*wire.Frame {
	t.Helper()
	tk := c.tasks[id]
	var got []*wire.Frame
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n {
		select {
		case f := <-tk.inbox:
			tk.taken(f) // as nextFrame does: the frame leaves the inbox
			got = append(got, f)
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("%s received %d frames, want %d", id, len(got), n)
			}
		}
	}
	return got
}

func kinds(fs []*wire.Frame) []wire.FrameKind {
	var out []wire.FrameKind
	for _, f := range fs {
		out = append(out, f.Kind)
	}
	return out
}

// TestCheckpointHandoffWindow provokes the window of an eager (not
// ordered) handoff: the old owner count-0 finished sending its lookup
// entries for buckets 0 and 2 to count-1 and forwarded a record there,
// count-1 has not processed them yet, and checkpoint barriers reach both.
// Count-1's part then lacks the entries and count-0's part gave the
// buckets away: count-0 must refuse its part until count-1 acks the
// install, and, since count-1 wrote its part of that checkpoint before
// installing, refuse that checkpoint even after the ack. The next
// checkpoint, both parts after the install, restores every key exactly.
func TestCheckpointHandoffWindow(t *testing.T) {
	store := t.TempDir()
	c := newKLTCkptCluster(t, store)
	ns := testnats.Start(t, &natsserver.Options{})
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.w.nc = nc // install events are announced

	moved := []int{0, 2}
	var a, b string // keys of the moved buckets, values on count-0
	var stay string // a key count-0 keeps
	for i := 0; stay == "" || a == "" || b == ""; i++ {
		k := keysInBuckets(i+1, false)[i]
		switch bk := statesvc.BucketOf([]byte(k), kltCkptBuckets); {
		case bk == 0 && a == "":
			a = k
		case bk == 2 && b == "":
			b = k
		case bk != 0 && bk != 2 && stay == "":
			stay = k
		}
	}
	old := c.tasks["count-0"]
	var kvs []statesvc.KV
	for k, v := range map[string]uint64{a: 10, b: 20, stay: 30} {
		kvs = append(kvs, statesvc.KV{Key: old.keyed.stateKey("count", []byte(k)), Value: binary.LittleEndian.AppendUint64(nil, v)})
	}
	if err := old.keyed.store.MultiPut(kvs); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	dep := c.handoffTo(moved)
	c.tasks["count-1"].mergeView(dep) // prepare-owners
	if err := old.handoff(ctx, dep, "r1", true, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for old.out.handoffSending() {
		if time.Now().After(deadline) {
			t.Fatal("count-0 did not finish sending its handoff")
		}
		time.Sleep(5 * time.Millisecond) // polling the sender goroutine
	}
	// In the window: a record of a moved bucket reaches count-0, which
	// forwards it behind the entries (the handoff queue is flushed).
	if err := old.handleSettled(ctx, &wire.Frame{Kind: wire.FrameData, JobID: c.dep.Job.JobID, FromTask: "source-0", ToTask: old.id, Records: []Record{{Key: []byte(a)}}}); err != nil {
		t.Fatal(err)
	}
	if ack := c.part(t, "count-1", "cp-000001"); ack.Error != "" {
		t.Fatalf("count-1's part before the install refused: %s", ack.Error)
	}
	ack := c.part(t, "count-0", "cp-000001")
	if !strings.Contains(ack.Error, "not yet installed") {
		t.Fatalf("count-0's part between the handoff and its install: error %q, want a refusal (handoff not yet installed)", ack.Error)
	}

	// Count-1 installs the entries (and counts the forwarded record); its
	// ack reaches count-0.
	// The eager handoff pushes each moved bucket's state in a KLT frame
	// of its own (handoff_push.go).
	in := c.waitFrames(t, "count-1", 4)
	if got := kinds(in); !slices.Equal(got, []wire.FrameKind{wire.FrameKLT, wire.FrameKLT, wire.FrameKLTEnd, wire.FrameData}) {
		t.Fatalf("count-1 received %v, want klt (bucket 0's state), klt (bucket 2's), klt-end, data", got)
	}
	for _, f := range in {
		if err := c.tasks["count-1"].handleSettled(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	acks := c.waitFrames(t, "count-0", 1)
	if acks[0].Kind != wire.FrameKLTAck {
		t.Fatalf("count-0 received %v, want the install ack", acks[0].Kind)
	}
	if err := old.handleSettled(ctx, acks[0]); err != nil {
		t.Fatal(err)
	}
	// A checkpoint count-1 wrote its part of before the install stays
	// refused (its part lacks the entries).
	if why := old.migrationInProgress(old.view.Load(), "cp-000001"); !strings.Contains(why, "before installing") {
		t.Fatalf("count-0 after the ack, checkpoint count-1 took before installing: %q, want a refusal", why)
	}

	// Checkpoint 2: both parts after the install.
	for _, id := range []string{"count-1", "count-0"} {
		if ack := c.part(t, id, "cp-000002"); ack.Error != "" {
			t.Fatalf("%s's part of cp-000002 refused: %s", id, ack.Error)
		}
	}
	got, where := restoredCounts(t, store, "cp-000002", moved...)
	if want := map[string]uint64{a: 11, b: 20, stay: 30}; !maps.Equal(got, want) {
		t.Errorf("restored cp-000002: %v, want %v", got, want)
	}
	for k, id := range where {
		owner := "count-0"
		if bk := statesvc.BucketOf([]byte(k), kltCkptBuckets); bk%2 == 1 || slices.Contains(moved, bk) {
			owner = "count-1"
		}
		if id != owner {
			t.Errorf("restored cp-000002: key %s in %s, its bucket's owner is %s", k, id, owner)
		}
	}
}
