package metrics

import (
	"context"
	"testing"
	"time"
)

// JobsSince lists the jobs active since a time, the latest first, with
// their first and last rows; older jobs are left out.
func TestJobsSince(t *testing.T) {
	ch, _ := testClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Unix(1_700_000_500, 0)
	rows := []TaskRow{
		{Time: t0, Experiment: "old", Job: "gone", Operator: "source", Task: "source-0"},
		{Time: t0.Add(10 * time.Second), Experiment: "e1", Job: "a", Operator: "source", Task: "source-0"},
		{Time: t0.Add(12 * time.Second), Experiment: "e1", Job: "a", Operator: "counter", Task: "counter-0"},
		{Time: t0.Add(11 * time.Second), Experiment: "e2", Job: "b", Operator: "source", Task: "source-0"},
		{Time: t0.Add(20 * time.Second), Experiment: "e2", Job: "b", Operator: "source", Task: "source-0"},
	}
	for _, r := range rows {
		ch.RecordTask(r)
	}
	if err := ch.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := ch.JobsSince(ctx, t0.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []JobSeen{
		{Job: "b", Experiment: "e2", First: t0.Add(11 * time.Second), Last: t0.Add(20 * time.Second)},
		{Job: "a", Experiment: "e1", First: t0.Add(10 * time.Second), Last: t0.Add(12 * time.Second)},
	}
	if len(got) != len(want) {
		t.Fatalf("JobsSince = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Job != w.Job || g.Experiment != w.Experiment || !g.First.Equal(w.First) || !g.Last.Equal(w.Last) {
			t.Errorf("job %d = %+v, want %+v", i, g, w)
		}
	}
}
