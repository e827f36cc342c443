package dataplane_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/workflows/wftest"
)

// slowGate lets a number of batches through the slow operator and holds
// every later one until released.
type slowGate struct {
	mu        sync.Mutex
	permits   int
	released  chan struct{}
	once      sync.Once
	blocked   atomic.Int32 // tasks waiting in the gate
	processed atomic.Int64 // records of batches that passed
}

func (g *slowGate) release() { g.once.Do(func() { close(g.released) }) }

func (g *slowGate) process(in []dataplane.Record, emit dataplane.Emit) error {
	g.mu.Lock()
	pass := g.permits > 0
	if pass {
		g.permits--
	}
	g.mu.Unlock()
	if !pass {
		g.blocked.Add(1)
		<-g.released
		g.blocked.Add(-1)
	}
	for _, r := range in {
		emit(r)
	}
	g.processed.Add(int64(len(in)))
	return nil
}

// currentGate is the gate of the running test: the query is registered
// once per process, its operators are built per run.
var currentGate atomic.Pointer[slowGate]

var readAheadQuery = dataplane.NewQuery("test-read-ahead").
	Source("source", 1).
	Process("slow", func(dataplane.OperatorContext) (dataplane.Operator, error) {
		g := currentGate.Load()
		return dataplane.OperatorFunc(g.process), nil
	}, false).Parallelism(2).
	RecordSink("sink")

// TestSourceReadAheadBoundedAndLagged holds the operator after the source
// while n records wait in Kafka: the source must stop reading once bound
// records are unprocessed, and its Kafka lag must count those, showing
// n − processed rather than the end offset minus what it read; released,
// the job must drain to a lag of 0 with every record once at the sink.
// The two slow tasks are placed on both workers, so acknowledgements
// travel both in memory and over the exchange.
func TestSourceReadAheadBoundedAndLagged(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	const n, bound, batch = 6000, 400, 100
	g := &slowGate{permits: 4, released: make(chan struct{})}
	currentGate.Store(g)
	rec := metrics.NewMemory()
	run := wftest.Start(t, wftest.Options{
		Query:       registerQuery(t, readAheadQuery),
		Parallelism: map[string]int{"slow": 2},
		Params:      map[string]string{control.ParamSourceMaxInFlightRecords: strconv.Itoa(bound)},
		BatchSize:   batch,
		Workers:     2,
		Recorder:    rec,
	})
	// Registered after the cluster's clean-up, so it runs before it: a
	// failed check must not leave tasks blocked in the gate at shutdown.
	t.Cleanup(g.release)
	src := run.Dep.TasksOf("source")[0]
	var remote bool
	for _, s := range run.Dep.TasksOf("slow") {
		remote = remote || s.WorkerID != src.WorkerID
	}
	if !remote {
		t.Fatalf("placement %v puts no slow task away from the source: the exchange path would go untested", run.Dep.Tasks)
	}

	input := make([]dataplane.Record, n)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range input {
		input[i] = dataplane.Record{Key: []byte(produce.KeyName(i % 97)), Value: []byte(strconv.Itoa(i)), EventTime: t0 + int64(i)*int64(time.Millisecond)}
	}
	run.Produce(input)
	if err := run.Acts.StartTasks(run.Ctx, activities.TasksInput{Deployment: run.Dep}); err != nil {
		t.Fatal(err)
	}

	// sourceRows are the source's metric rows so far: what it emitted in
	// all, and its last reported lag.
	sourceRows := func() (emitted, lag uint64, rows int) {
		for _, r := range rec.Tasks() {
			if r.Job == run.Job.JobID && r.Task == src.ID {
				emitted += r.RecordsOut
				lag = r.KafkaLag
				rows++
			}
		}
		return emitted, lag, rows
	}
	counters := func() map[string]uint64 { return run.Counters()[src.ID] }

	// Held: both slow tasks wait, the source has read as far as its bound
	// lets it (it polls whole batches, so it stops within one of it).
	run.WaitFor("the source to reach its read-ahead bound behind the held tasks", func() bool {
		return g.blocked.Load() == 2 && counters()["source_in_flight"] > bound-batch
	})
	processed := uint64(g.processed.Load())
	if processed == 0 || processed >= n-bound {
		t.Fatalf("%d records passed the gate before it held, want some but far fewer than %d", processed, n)
	}
	run.WaitFor(fmt.Sprintf("a lag of n − processed = %d", n-processed), func() bool {
		_, lag, rows := sourceRows()
		return rows > 0 && lag == n-processed
	})
	emitted, lag, _ := sourceRows()
	if got := uint64(g.processed.Load()); got != processed {
		t.Fatalf("%d records passed the held gate (%d before)", got, processed)
	}
	if emitted > processed+bound {
		t.Fatalf("source emitted %d records with %d processed: %d in flight, bound %d", emitted, processed, emitted-processed, bound)
	}
	t.Logf("held: %d processed, %d emitted by the source, lag %d", processed, emitted, lag)

	g.release()
	run.WaitFor("every record at the sink", func() bool { return len(run.Output()) >= n })
	run.WaitFor("the lag to drain to 0", func() bool {
		_, lag, _ := sourceRows()
		return lag == 0
	})
	res := run.Finish()
	if peak := res.Counters[src.ID]["source_in_flight_peak"]; peak == 0 || peak > bound {
		t.Fatalf("peak of records in flight %d, want 1..%d", peak, bound)
	}
	seen := make([]bool, n)
	for _, r := range res.Output {
		i, err := strconv.Atoi(string(r.Value))
		if err != nil || i < 0 || i >= n || seen[i] {
			t.Fatalf("sink record %q: unknown or duplicate (%v)", r.Value, err)
		}
		seen[i] = true
	}
	if len(res.Output) != n {
		t.Fatalf("sink holds %d records, want %d", len(res.Output), n)
	}
}
