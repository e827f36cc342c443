package dataplane

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/dataplane/metrics"
)

type lateCounter struct{ late atomic.Uint64 }

func (o *lateCounter) ProcessBatch([]Record, Emit) error { return nil }
func (o *lateCounter) Counters() map[string]uint64 {
	return map[string]uint64{"late_records": o.late.Load()}
}

// TestMetricRowsCountBadRecords checks that the worker's metrics loop puts
// per-second deltas of the dead-letter counts and of the operator's late
// records into the task rows.
func TestMetricRowsCountBadRecords(t *testing.T) {
	mem := metrics.NewMemory()
	w := &Worker{opts: Options{ID: "w1", Recorder: mem}, log: slog.Default(), tasks: map[string]*task{}}
	op := &lateCounter{}
	dead := kafkaio.NewTestDeadLetters("win")
	tk := &task{w: w, jobID: "j", id: "win-0", opName: "win", op: op, dead: dead}
	tk.view.Store(&taskView{job: control.JobSpec{JobID: "j", Experiment: "e"}})
	tk.started.Store(true)
	w.tasks[tk.key()] = tk

	bad := func(n int, reason string) {
		for range n {
			dead.Reject(Record{Key: []byte("k")}, reason, errors.New("test"))
		}
	}
	now := time.Unix(1_700_000_000, 0)
	bad(3, kafkaio.ReasonMalformed)
	bad(2, kafkaio.ReasonOversize)
	op.late.Add(4)
	w.emitMetrics(now)
	bad(1, "no-such-field") // an operator's own reason counts as malformed
	dead.AddWritten(5)      // as if acknowledged by a dead-letter topic
	op.late.Add(1)
	w.emitMetrics(now.Add(time.Second))
	w.emitMetrics(now.Add(2 * time.Second))
	rows := mem.Tasks()
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	want := [][4]uint64{{3, 2, 0, 4}, {1, 0, 5, 1}, {0, 0, 0, 0}}
	for i, r := range rows {
		if got := [4]uint64{r.Malformed, r.Oversize, r.DeadLettered, r.LateEvents}; got != want[i] {
			t.Errorf("row %d: malformed, oversize, dead-lettered, late = %v, want %v", i, got, want[i])
		}
	}
}
