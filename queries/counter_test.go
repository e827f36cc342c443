package queries_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/workflows"
	"koala/workflows/wftest"
)

// TestCounterPaddedState runs the counter with a DummyFieldSize pad,
// rescales it 2→4 lazily with fetch-on-demand and touches every key again:
// each migrated entry must be the key and a value of 8 + pad bytes (the
// store holds the padded value), and the sink must still see the plain
// count per key.
func TestCounterPaddedState(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const numKeys, pad = 3000, 1000
	var recs []dataplane.Record
	for i := range numKeys {
		recs = append(recs, dataplane.Record{Key: []byte(produce.KeyName(i)), Value: []byte{1}})
	}
	var run *wftest.Run
	res := wftest.RunQuery(t, wftest.Options{
		Query: "counter", Parallelism: map[string]int{"counter": 2}, Backend: "pebble", Workers: 3, Timeout: 3 * time.Minute,
		Params: map[string]string{control.ParamDummyFieldSize: strconv.Itoa(pad), control.ParamMigrationMode: control.ModeFetchOnDemand},
		Phases: []wftest.Phase{
			{Records: recs, Until: func(r *wftest.Run) bool { return len(r.SinkValues()) == numKeys }, Then: func(r *wftest.Run) {
				r.Rescale(workflows.ReconfigureLazy, "counter", 4)
				run = r
			}},
			{Records: recs},
		},
	})
	if res.Sink.Duplicates != 0 {
		t.Errorf("sink duplicates: %d", res.Sink.Duplicates)
	}
	vals := run.SinkValues()
	for i := range numKeys {
		if k := produce.KeyName(i); vals[k] != 2 {
			t.Fatalf("key %s: count %d, want 2", k, vals[k])
		}
	}
	for _, o := range res.Output {
		if len(o.Value) != 8 {
			t.Fatalf("key %s: output value of %d bytes, want the 8-byte count", o.Key, len(o.Value))
		}
	}
	var fetched, moved uint64
	for _, task := range run.Dep.TasksOf("counter") {
		st := taskStatus(t, run, task)
		fetched, moved = fetched+st.KeysFetched, moved+st.BytesMoved
	}
	if fetched == 0 {
		t.Fatal("no key was fetched after the rescale")
	}
	if want := fetched * (8 + 8 + pad); moved != want {
		t.Errorf("%d keys fetched moved %d bytes, want %d (8-byte key, 8-byte count, %d-byte pad each)", fetched, moved, want, pad)
	}
}

func taskStatus(t *testing.T, r *wftest.Run, task control.TaskRef) control.TaskStatus {
	t.Helper()
	data, err := control.NewEnvelope(r.Job.JobID, "", control.TasksRequest{TaskIDs: []string{task.ID}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := r.Acts.NC.RequestWithContext(r.Ctx, control.WorkerSubject(task.WorkerID, control.VerbStatus), data)
	if err != nil {
		t.Fatal(err)
	}
	var rep control.Reply
	var st control.StatusReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rep.Body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Tasks) != 1 {
		t.Fatal(fmt.Errorf("status of %s: %d tasks", task.ID, len(st.Tasks)))
	}
	return st.Tasks[0]
}
