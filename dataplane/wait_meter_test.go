package dataplane

import (
	"log/slog"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// TestWaitMeter checks the meter's accounting: finished waits, a wait
// running across takes (split at each take, never counted twice), and
// the ratio's bounds.
func TestWaitMeter(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		op   string // begin, end, take
		ms   int
		want time.Duration // take's result
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"no wait", []step{{"take", 1000, 0}}},
		{"two finished waits", []step{{"begin", 100, 0}, {"end", 300, 0}, {"begin", 500, 0}, {"end", 550, 0}, {"take", 1000, 250 * time.Millisecond}, {"take", 2000, 0}}},
		{"a wait across three takes", []step{{"begin", 400, 0}, {"take", 1000, 600 * time.Millisecond}, {"take", 2000, time.Second}, {"end", 2300, 0}, {"take", 3000, 300 * time.Millisecond}}},
		{"end without begin", []step{{"end", 300, 0}, {"take", 1000, 0}}},
		{"take before the wait began", []step{{"begin", 1500, 0}, {"take", 1000, 0}, {"end", 1700, 0}, {"take", 2000, 200 * time.Millisecond}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m waitMeter
			for i, s := range tc.steps {
				switch s.op {
				case "begin":
					m.begin(at(s.ms))
				case "end":
					m.end(at(s.ms))
				case "take":
					if got := m.take(at(s.ms)); got != s.want {
						t.Fatalf("step %d: take at %d ms = %v, want %v", i, s.ms, got, s.want)
					}
				}
			}
		})
	}
	for _, c := range []struct {
		waited, interval time.Duration
		want             float64
	}{{250 * time.Millisecond, time.Second, 0.25}, {3 * time.Second, time.Second, 1}, {time.Second, 0, 0}, {-time.Second, time.Second, 0}} {
		if got := waitRatio(c.waited, c.interval); got != c.want {
			t.Errorf("waitRatio(%v, %v) = %v, want %v", c.waited, c.interval, got, c.want)
		}
	}
}

// TestMetricRowsCarryWaitRatios checks that a task's metric rows carry its
// waits as fractions of each row's interval: a task that waited for
// input through a whole second reports an idle ratio of 1, not 0 (the
// workers left both ratios at 0 before they were measured).
func TestMetricRowsCarryWaitRatios(t *testing.T) {
	mem := metrics.NewMemory()
	w := &Worker{opts: Options{ID: "w1", Recorder: mem}, log: slog.Default(), tasks: map[string]*task{}}
	tk := &task{w: w, jobID: "j", id: "count-0", opName: "count"}
	tk.view.Store(&taskView{job: control.JobSpec{JobID: "j", Experiment: "e"}})
	tk.started.Store(true)
	w.tasks[tk.key()] = tk

	now := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Time { return now.Add(time.Duration(n) * time.Millisecond) }
	tk.stats.idle.begin(ms(-1000))
	tk.stats.idle.end(ms(-200)) // 0.8 s of the first second idle
	tk.stats.blocked.begin(ms(-100))
	tk.stats.blocked.end(ms(-50))
	w.emitMetrics(now)
	tk.stats.idle.begin(ms(0)) // idle through the next two seconds and on
	w.emitMetrics(ms(1000))
	w.emitMetrics(ms(3000)) // a late tick: the interval is 2 s
	tk.stats.idle.end(ms(3500))
	tk.stats.blocked.begin(ms(3500))
	w.emitMetrics(ms(4000))

	rows := mem.Tasks()
	want := []struct{ idle, bp float64 }{{0.8, 0.05}, {1, 0}, {1, 0}, {0.5, 0.5}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		if !near(rows[i].IdleRatio, w.idle) || !near(rows[i].BackpressureRatio, w.bp) {
			t.Errorf("row %d: idle %.3f, backpressure %.3f; want %.3f, %.3f", i, rows[i].IdleRatio, rows[i].BackpressureRatio, w.idle, w.bp)
		}
	}
}

func near(got, want float64) bool { return got > want-1e-9 && got < want+1e-9 }
