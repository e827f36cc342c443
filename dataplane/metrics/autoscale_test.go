package metrics

import (
	"context"
	"testing"
	"time"
)

// TaskRows reads back exactly the window's seconds, from ClickHouse and
// from Memory alike; the autoscale log stores and returns its rows.
func TestTaskRowsWindowAndAutoscaleLog(t *testing.T) {
	ch, _ := testClickHouse(t)
	mem := NewMemory()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Unix(1_700_000_100, 0)
	for s := range 6 {
		for _, task := range []string{"counter-0", "counter-1"} {
			r := TaskRow{Time: t0.Add(time.Duration(s)*time.Second + 250*time.Millisecond), Job: "auto", Operator: "counter", Task: task, Worker: "w1",
				RecordsIn: uint64(100 * (s + 1)), RecordsOut: uint64(100 * (s + 1)), Batches: 3, BatchTimeAvgUs: 2500.5, KafkaLag: 7, IdleRatio: 0.25, BackpressureRatio: 0.125,
				BytesTransferred: uint64(4096 * s), KeysFetched: uint64(12 * s), KLTSize: uint64(30 - s)}
			ch.RecordTask(r)
			mem.RecordTask(r)
		}
		ch.RecordTask(TaskRow{Time: t0.Add(time.Duration(s) * time.Second), Job: "other", Operator: "counter", Task: "counter-0"})
	}
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	from, to := t0.Add(2*time.Second), t0.Add(5*time.Second)
	got, err := ch.TaskRows(ctx, "auto", from, to)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mem.TaskRows(ctx, "auto", from, to)
	if len(got) != 6 || len(want) != 6 {
		t.Fatalf("ClickHouse returned %d rows, Memory %d; want 2 tasks × seconds 2, 3, 4", len(got), len(want))
	}
	for i, r := range got {
		w := want[i]
		w.Time = w.Time.Truncate(time.Second) // stored per second
		if r != w {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, r, w)
		}
	}

	log := NewAutoscaleLog(ch)
	rows := []AutoscaleRow{
		{Time: to.Add(300 * time.Millisecond), WindowFrom: from, Job: "auto", Autoscaler: "auto-autoscaler", Seq: 4, Operator: "counter", Action: "scale-out",
			From: 2, To: 4, Target: 4, RawTarget: 3.4, TrueRate: 9100, InputRate: 30000, ObservedRate: 18000, Utilization: 0.99,
			Outcome: "done", Detail: "counter 2→4: true rate 9.1 K/s/task, input 30 K/s"},
		{Time: to.Add(300 * time.Millisecond), WindowFrom: from, Job: "auto", Autoscaler: "auto-autoscaler", Seq: 4, Operator: "source", Action: "none",
			From: 1, To: 1, Target: 1, InputRate: 30000, Arrival: 29000, KafkaLag: 30000},
	}
	if err := log.Record(ctx, rows); err != nil {
		t.Fatal(err)
	}
	back, err := NewAutoscaleLog(ch).Rows(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0] != rows[0] || back[1] != rows[1] {
		t.Fatalf("decision rows:\n got %+v\nwant %+v", back, rows)
	}
	if none, err := log.Rows(ctx, "other"); err != nil || len(none) != 0 {
		t.Fatalf("rows of another job: %v %v", none, err)
	}
}
