package dataplane

import (
	"log/slog"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// TestMetricRowsCarryBatchTimeHistogram checks that each second's metric
// row of a task carries exactly the batches of that second as an HDR
// histogram, and none when no batch ran.
func TestMetricRowsCarryBatchTimeHistogram(t *testing.T) {
	mem := metrics.NewMemory()
	w := &Worker{opts: Options{ID: "w1", Recorder: mem}, log: slog.Default(), tasks: map[string]*task{}}
	tk := &task{w: w, jobID: "j", id: "count-0", opName: "count"}
	tk.view.Store(&taskView{job: control.JobSpec{JobID: "j", Experiment: "e"}})
	tk.started.Store(true)
	w.tasks[tk.key()] = tk

	now := time.Unix(1_700_000_000, 0)
	for range 9 {
		tk.stats.observeBatch(2 * time.Millisecond)
	}
	tk.stats.observeBatch(40 * time.Millisecond)
	w.emitMetrics(now)
	tk.stats.observeBatch(7 * time.Millisecond)
	w.emitMetrics(now.Add(time.Second))
	w.emitMetrics(now.Add(2 * time.Second))

	rows := mem.Tasks()
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for i, want := range []struct {
		n             uint64
		p50, p99, max int64
	}{{10, 2000, 40_000, 40_000}, {1, 7000, 7000, 7000}} {
		p, ok, err := metrics.MergeBatchHists([]string{rows[i].BatchTimeHDR})
		if err != nil || !ok {
			t.Fatalf("row %d: %v %v", i, ok, err)
		}
		near := func(got, v int64) bool { return got >= v-v/1000 && got <= v+v/1000 }
		if p.Count != want.n || !near(p.P50Us, want.p50) || !near(p.P99Us, want.p99) || !near(p.MaxUs, want.max) {
			t.Errorf("row %d: %+v, want %+v", i, p, want)
		}
		if rows[i].Batches != want.n {
			t.Errorf("row %d: batches %d, histogram %d", i, rows[i].Batches, p.Count)
		}
	}
	if rows[2].BatchTimeHDR != "" {
		t.Errorf("a second without batches carries a histogram: %q", rows[2].BatchTimeHDR)
	}
}
