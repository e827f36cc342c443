package autoscale

import (
	"math"
	"slices"
	"testing"
	"time"

	"koala/dataplane/metrics"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

func TestAggregate(t *testing.T) {
	t0 := time.Unix(2000, 0)
	var rows []metrics.TaskRow
	for s := -1; s <= 4; s++ { // seconds -1 and 4 are outside [t0, t0+4)
		at := t0.Add(time.Duration(s)*time.Second + 400*time.Millisecond)
		rows = append(rows,
			// Source: reads 1000/s, lag grows 50/s.
			metrics.TaskRow{Time: at, Job: "j", Operator: "source", Task: "source-0", RecordsIn: 1000, RecordsOut: 1000, Batches: 10, BatchTimeAvgUs: 1000, KafkaLag: uint64(100 + 50*(s+1))},
			// Two counter tasks, 500 records each in 0.25 s of batches.
			metrics.TaskRow{Time: at, Job: "j", Operator: "counter", Task: "counter-0", RecordsIn: 500, RecordsOut: 500, Batches: 5, BatchTimeAvgUs: 50_000},
			// The second one is also blocked 0.05 s on its downstream
			// inside its batches, and waits 0.7 s for input.
			metrics.TaskRow{Time: at, Job: "j", Operator: "counter", Task: "counter-1", RecordsIn: 500, RecordsOut: 500, Batches: 5, BatchTimeAvgUs: 60_000, IdleRatio: 0.7, BackpressureRatio: 0.05},
			metrics.TaskRow{Time: at, Job: "other", Operator: "counter", Task: "counter-0", RecordsIn: 99999, Batches: 1, BatchTimeAvgUs: 1},
		)
	}
	obs := Aggregate(rows, "j", t0, t0.Add(4*time.Second))
	if obs.Seconds() != 4 {
		t.Fatalf("window %v s", obs.Seconds())
	}
	if names := []string{obs.Operators[0].Operator, obs.Operators[1].Operator}; !slices.Equal(names, []string{"counter", "source"}) || len(obs.Operators) != 2 {
		t.Fatalf("operators %+v", obs.Operators)
	}
	c, _ := obs.Operator("counter")
	if c.Tasks != 2 || !near(c.RecordsIn, 1000) || !near(c.RecordsOut, 1000) || !near(c.Busy, 0.5) {
		t.Fatalf("counter %+v: want 2 tasks, 1000/s in and out, 0.5 busy task-seconds per second", c)
	}
	if !near(c.TrueRate(), 2000) || !near(c.Utilization(), 0.25) || !near(c.Selectivity(), 1) {
		t.Fatalf("counter true rate %v utilization %v selectivity %v", c.TrueRate(), c.Utilization(), c.Selectivity())
	}
	s, _ := obs.Operator("source")
	// Lag at second 0 is 150, at second 3 it is 300.
	if s.Tasks != 1 || s.LagStart != 150 || s.LagEnd != 300 || !near(s.TrueRate(), 100_000) {
		t.Fatalf("source %+v", s)
	}
	if empty := Aggregate(rows, "j", t0, t0); len(empty.Operators) != 0 {
		t.Fatalf("an empty window aggregates nothing: %+v", empty)
	}
	if l := (OperatorLoad{}); l.TrueRate() != 0 || l.Selectivity() != 1 || l.Utilization() != 0 {
		t.Fatalf("zero load: true rate %v selectivity %v utilization %v", l.TrueRate(), l.Selectivity(), l.Utilization())
	}
}

func TestBusySeconds(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  metrics.TaskRow
		want float64
	}{
		{"no ratios measured: the batch time", metrics.TaskRow{Batches: 4, BatchTimeAvgUs: 100_000}, 0.4},
		{"never more than the second", metrics.TaskRow{Batches: 10, BatchTimeAvgUs: 500_000}, 1},
		{"idle between batches leaves the batch time", metrics.TaskRow{Batches: 4, BatchTimeAvgUs: 100_000, IdleRatio: 0.6}, 0.4},
		// 0.9 s of batches, 0.5 s of it blocked handing output on.
		{"backpressure inside batches is not busy", metrics.TaskRow{Batches: 9, BatchTimeAvgUs: 100_000, IdleRatio: 0.1, BackpressureRatio: 0.5}, 0.4},
		// A source waiting for credit 0.85 s between 0.1 s of batches.
		{"a source's credit wait leaves its batch time", metrics.TaskRow{Batches: 10, BatchTimeAvgUs: 10_000, IdleRatio: 0.02, BackpressureRatio: 0.85}, 0.1},
		{"ratios over 1 in all give 0", metrics.TaskRow{Batches: 1, BatchTimeAvgUs: 10_000, IdleRatio: 0.6, BackpressureRatio: 0.6}, 0},
	} {
		if got := busySeconds(tc.row); !near(got, tc.want) {
			t.Errorf("%s: busy %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMissing(t *testing.T) {
	t0 := time.Unix(3000, 0)
	row := func(task string, s int) metrics.TaskRow {
		return metrics.TaskRow{Time: t0.Add(time.Duration(s)*time.Second + 900*time.Millisecond), Job: "j", Operator: "op", Task: task}
	}
	to := t0.Add(5 * time.Second)
	for _, tc := range []struct {
		name string
		rows []metrics.TaskRow
		want []string
	}{
		{"no rows", nil, nil},
		{"complete", []metrics.TaskRow{row("a", 0), row("a", 4), row("b", 3), row("b", 4)}, nil},
		{"a later row counts", []metrics.TaskRow{row("a", 2), row("a", 6)}, nil},
		{"b has not reported its last second", []metrics.TaskRow{row("b", 3), row("a", 4), row("c", 1)}, []string{"b", "c"}},
		{"rows before the window do not count", []metrics.TaskRow{row("a", -1), row("b", 4)}, nil},
	} {
		if got := Missing(tc.rows, "j", t0, to); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Missing = %v, want %v", tc.name, got, tc.want)
		}
	}
}
