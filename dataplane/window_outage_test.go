package dataplane_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"koala/activities"
	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/workflows/wftest"
)

var windowOutageQuery = dataplane.NewQuery("test-window-outage").
	Source("source", 1).
	Window("window", dataplane.Tumbling(time.Second), func() dataplane.Aggregator { return dataplane.CountAggregator{} }).
	RecordSink("sink")

// brokerOutage cuts the requests of the given kinds off (their connection
// is closed before the broker handles them) while they are down.
type brokerOutage struct {
	mu   sync.Mutex
	down map[kmsg.Key]bool
	cut  map[kmsg.Key]int
	ok   map[kmsg.Key]int
}

func newBrokerOutage(kc *kfake.Cluster, keys ...kmsg.Key) *brokerOutage {
	o := &brokerOutage{down: map[kmsg.Key]bool{}, cut: map[kmsg.Key]int{}, ok: map[kmsg.Key]int{}}
	for _, k := range keys {
		kc.ControlKey(int16(k), func(kmsg.Request) (kmsg.Response, error, bool) {
			kc.KeepControl()
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.down[k] {
				o.cut[k]++
				return nil, errors.New("broker down"), true
			}
			o.ok[k]++
			return nil, nil, false
		})
	}
	return o
}

func (o *brokerOutage) set(down bool, keys ...kmsg.Key) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range keys {
		o.down[k] = down
	}
}

func (o *brokerOutage) cuts(k kmsg.Key) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cut[k]
}

func (o *brokerOutage) served(k kmsg.Key) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ok[k]
}

// Regression (koala soak --seed 9 --minutes 4 --segment 80s, window job
// with the default 1 s SourceIdleTimeoutMs: about 1,900 of 13,800 windows
// lost after a Kafka restart). During the outage every partition went
// quiet and, its last known end offset reached, counted as idle; when the
// broker was back the first partition to deliver its backlog carried the
// watermark past the records the other partition delivered a moment
// later, which were dropped as late.
//
// Here the broker stops answering fetches and end-offset lookups for 5 s;
// when it is back, partition 0's records of the outage arrive, and
// partition 1's (of the same event times) 2 s later — as a producer's batch
// that was in flight when the broker died is retried after its buffered
// ones. Either the end-offset lookups work again only after that, or at
// once (then they show partition 1 caught up while its records are still
// to come). A partition whose end offset went stale now holds the
// watermark until it delivers again or SourceOutageGraceMs passed
// (dataplane/idleness.go), so every window is exact.
func TestWindowSurvivesBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	t.Run("lookups back last", func(t *testing.T) { runWindowOutage(t, false, false) })
	t.Run("lookups back first", func(t *testing.T) { runWindowOutage(t, true, false) })
	// Regression (CI, the same soak: 915 of 13,948 windows lost after a
	// Kafka restart): partition 1 also has records the broker appended
	// after the source's last fetch, before it died. They come first
	// when it is back; reading them past the end known before the outage
	// ended the partition's outage, so it counted as idle again while
	// the rest of its records (the retried in-flight batch) were still
	// to come. Only a record past an end looked up after the outage ends
	// it now.
	t.Run("records appended after the last fetch", func(t *testing.T) { runWindowOutage(t, true, true) })
}

func runWindowOutage(t *testing.T, lookupsBackFirst, appendedUnseen bool) {
	const numKeys = 20
	records := func(part int32, from, to int64) []dataplane.Record {
		var out []dataplane.Record
		for ts, i := t0+from*sec, 0; ts < t0+to*sec; ts, i = ts+int64(10*time.Millisecond), i+1 {
			out = append(out, dataplane.Record{Key: []byte(produce.KeyName(i % numKeys)), EventTime: ts, Partition: part})
		}
		return out
	}
	before := append(records(0, 0, 3), records(1, 0, 3)...)
	outage0, outage1 := records(0, 3, 8), records(1, 3, 8)
	var unseen []dataplane.Record // partition 1's, appended as the broker died
	if appendedUnseen {
		unseen, outage1 = records(1, 3, 4), records(1, 4, 8)
	}
	want := map[string]uint64{}
	for _, rs := range [][]dataplane.Record{before, unseen, outage0, outage1} {
		for _, r := range rs {
			want[string(dataplane.WindowResultKey(r.Key, (r.EventTime/sec+1)*sec))]++
		}
	}

	run := wftest.Start(t, wftest.Options{
		Query: registerQuery(t, windowOutageQuery), Partitions: 2, ManualPartitions: true, Workers: 2,
		Params: map[string]string{control.ParamSourceIdleTimeout: "1000"},
	})
	outage := newBrokerOutage(run.Cluster.Kafka(), kmsg.Fetch, kmsg.ListOffsets)
	run.Produce(before)
	if err := run.Acts.StartTasks(run.Ctx, activities.TasksInput{Deployment: run.Dep}); err != nil {
		t.Fatal(err)
	}
	firstWindow := string(dataplane.WindowResultKey([]byte(produce.KeyName(0)), t0+sec))
	run.WaitFor("the first window", func() bool {
		for _, rec := range run.Output() {
			if string(rec.Key) == firstWindow {
				return true
			}
		}
		return false
	})

	// The outage: long enough for both partitions to be quiet past the
	// idle timeout and their end offsets to go stale.
	outage.set(true, kmsg.Fetch, kmsg.ListOffsets)
	began := time.Now()
	if len(unseen) > 0 {
		// Once a fetch was cut off (one already waiting at the broker
		// would return them), produce requests still work: no fetch sees
		// these until the broker is back.
		run.WaitFor("a fetch cut off", func() bool { return outage.cuts(kmsg.Fetch) > 0 })
		run.Produce(unseen)
	}
	run.WaitFor("the outage", func() bool {
		return time.Since(began) > 5*time.Second && outage.cuts(kmsg.Fetch) > 0 && outage.cuts(kmsg.ListOffsets) > 0
	})
	// Fetches work again; partition 0's backlog arrives first.
	outage.set(false, kmsg.Fetch)
	if lookupsBackFirst {
		outage.set(false, kmsg.ListOffsets)
	}
	lookups := outage.served(kmsg.ListOffsets)
	run.Produce(outage0)
	source := run.Dep.TasksOf("source")[0]
	run.WaitFor("partition 0's backlog read", func() bool {
		return taskRecordsIn(t, run, source) >= uint64(len(before)+len(unseen)+len(outage0))
	})
	read := time.Now()
	// Past the idle timeout: without the fresh-end rule, partition 1
	// counted as idle again by now and the watermark ran ahead.
	run.WaitFor("partition 1 quiet past the idle timeout", func() bool {
		// With the lookups back, two of them after the backlog was read.
		return time.Since(read) > 2*time.Second && (!lookupsBackFirst || outage.served(kmsg.ListOffsets) >= lookups+2)
	})
	run.Produce(outage1)
	outage.set(false, kmsg.ListOffsets)
	res := run.Finish()

	got := map[string]uint64{}
	for _, r := range res.Output {
		got[string(r.Key)] += binary.LittleEndian.Uint64(r.Value)
	}
	bad := 0
	for k, v := range want {
		if got[k] != v {
			if bad < 5 {
				t.Errorf("window %q: count %d, want %d", k, got[k], v)
			}
			bad++
		}
	}
	if bad > 0 || len(got) != len(want) {
		t.Errorf("%d of %d windows wrong (%d fired)", bad, len(want), len(got))
	}
	if n := res.Counter("window", "late_records"); n != 0 {
		t.Errorf("%d late records, want none", n)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d windows exact; %s from the outage to the backlog read (%d fetches and %d end-offset lookups cut off)",
		len(want), read.Sub(began).Round(100*time.Millisecond), outage.cuts(kmsg.Fetch), outage.cuts(kmsg.ListOffsets))
}

// taskRecordsIn asks task's worker for its status.
func taskRecordsIn(t *testing.T, run *wftest.Run, task control.TaskRef) uint64 {
	t.Helper()
	data, err := control.NewEnvelope(run.Job.JobID, "", control.TasksRequest{TaskIDs: []string{task.ID}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := run.Acts.NC.RequestWithContext(run.Ctx, control.WorkerSubject(task.WorkerID, control.VerbStatus), data)
	if err != nil {
		t.Fatal(err)
	}
	var r control.Reply
	var st control.StatusReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	if err := json.Unmarshal(r.Body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Tasks) != 1 {
		t.Fatalf("status of %s: %d tasks", task.ID, len(st.Tasks))
	}
	return st.Tasks[0].RecordsIn
}
