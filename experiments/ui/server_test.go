package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
)

// fakeWorkers answers for two workers of job "j": w1 runs the source and
// counter-0, w2 counter-1 (an old owner migrating keys out) and w3 does
// not answer.
type fakeWorkers struct{}

func (fakeWorkers) Live() []control.WorkerInfo {
	return []control.WorkerInfo{
		{ID: "w1", Tasks: []string{"j/source-0", "j/counter-0"}},
		{ID: "w2", Tasks: []string{"j/counter-1", "other/sink-0"}},
		{ID: "w3", Tasks: []string{"j/sink-0"}},
	}
}

func (fakeWorkers) Status(_ context.Context, job, worker string) (control.StatusReply, error) {
	switch worker {
	case "w1":
		return control.StatusReply{WorkerID: "w1", Tasks: []control.TaskStatus{
			{TaskID: "counter-0", Operator: "counter", Running: true, Epoch: 3, Epochs: map[string]int64{"sink": 1}, KLTSize: 7},
			{TaskID: "source-0", Operator: "source", Running: true, Epoch: 1, Epochs: map[string]int64{"counter": 2}},
		}}, nil
	case "w2":
		return control.StatusReply{WorkerID: "w2", Tasks: []control.TaskStatus{
			{TaskID: "counter-1", Operator: "counter", Running: true, Epoch: 3, Epochs: map[string]int64{"sink": 1}, KLTSize: 3},
		}}, nil
	}
	return control.StatusReply{}, errors.New("nats: timeout")
}

type fakeMetrics struct {
	now time.Time
	err error
}

func (f fakeMetrics) JobsSince(context.Context, time.Time) ([]metrics.JobSeen, error) {
	return []metrics.JobSeen{
		{Job: "j", Experiment: "counter-exp", First: f.now.Add(-time.Minute), Last: f.now},
		{Job: "old", Experiment: "hello", First: f.now.Add(-40 * time.Minute), Last: f.now.Add(-30 * time.Minute)},
	}, f.err
}

func (f fakeMetrics) TaskRows(_ context.Context, job string, _, _ time.Time) ([]metrics.TaskRow, error) {
	if job != "j" {
		return nil, f.err
	}
	var rows []metrics.TaskRow
	for s := -3; s < 0; s++ {
		at := f.now.Add(time.Duration(s) * time.Second).Truncate(time.Second)
		rows = append(rows,
			metrics.TaskRow{Time: at, Operator: "source", Task: "source-0", Worker: "w1", RecordsIn: 3000, KafkaLag: 120, IdleRatio: 0.5},
			metrics.TaskRow{Time: at, Operator: "counter", Task: "counter-0", Worker: "w1", RecordsIn: 1500, IdleRatio: 0.7, BackpressureRatio: 0.1,
				BytesTransferred: 400, KeysFetched: 10, KLTSize: 7},
			metrics.TaskRow{Time: at, Operator: "counter", Task: "counter-1", Worker: "w2", RecordsIn: 1500, IdleRatio: 0.8, KLTSize: 3},
			metrics.TaskRow{Time: at, Operator: "sink", Task: "sink-0", Worker: "w3", RecordsIn: 3000, IdleRatio: 0.9},
		)
	}
	return rows, f.err
}

func (f fakeMetrics) ReconfigEvents(_ context.Context, job string) ([]metrics.ReconfigEvent, error) {
	if job != "j" {
		return nil, f.err
	}
	ev := func(ago time.Duration, step, phase string) metrics.ReconfigEvent {
		return metrics.ReconfigEvent{Time: f.now.Add(-ago), Experiment: "counter-exp", Job: "j", ReconfigID: "j-reconfig-1", Protocol: "lazy", Step: step, Phase: phase}
	}
	return []metrics.ReconfigEvent{
		ev(5*time.Second, "plan", "start"), ev(5*time.Second, "plan", "end"),
		ev(4*time.Second, "swap-routes", "start"), ev(4*time.Second, "swap-routes", "end"),
		ev(4*time.Second, "await-migration", "start"),
	}, f.err
}

func testServer(t *testing.T, m Metrics, w Workers) *httptest.Server {
	t.Helper()
	s, err := NewServer(Config{Workers: w, Metrics: m, TemporalUI: "http://127.0.0.1:8233/", Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

func TestAPIJob(t *testing.T) {
	ts := testServer(t, fakeMetrics{now: t0}, fakeWorkers{})
	code, ctype, body := get(t, ts.URL+"/api/jobs/j")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET /api/jobs/j: %d %s\n%s", code, ctype, body)
	}
	var v JobView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range v.Operators {
		names = append(names, op.Name)
	}
	if strings.Join(names, ",") != "source,counter" {
		t.Errorf("operators %v, want source, counter (upstream first; the sink's worker did not answer)", names)
	}
	counter := v.Operators[1]
	if len(counter.Tasks) != 2 || counter.Epoch != 3 || counter.MinEpoch != 2 || len(counter.Workers) != 2 {
		t.Errorf("counter: %d tasks, epochs %d..%d, workers %+v; want 2 tasks, epochs 2..3 (the source still routes with 2), w1 and w2",
			len(counter.Tasks), counter.MinEpoch, counter.Epoch, counter.Workers)
	}
	c0 := counter.Tasks[0]
	if c0.ID != "counter-0" || c0.Rate != 1500 || len(c0.Series.Time) != 3 || c0.Busy < 0.19 || c0.Busy > 0.21 || c0.KeysLeft != 7 {
		t.Errorf("counter-0: %+v", c0)
	}
	if v.Operators[0].Tasks[0].KafkaLag != 120 {
		t.Errorf("source lag %d, want 120", v.Operators[0].Tasks[0].KafkaLag)
	}
	if len(v.Problems) != 1 || !strings.Contains(v.Problems[0], "worker w3") {
		t.Errorf("problems %q, want worker w3's timeout", v.Problems)
	}
	r := v.Reconfig
	if r == nil || r.ID != "j-reconfig-1" || r.Status != StatusMigrating || r.Step != "await-migration" || r.KeysLeft != 10 ||
		r.TemporalURL != "http://127.0.0.1:8233/namespaces/default/workflows/j-reconfig-1" {
		t.Fatalf("reconfiguration: %+v", r)
	}
	if v.TemporalURL != "http://127.0.0.1:8233/namespaces/default/workflows/j" || v.Experiment != "counter-exp" || !v.Running {
		t.Errorf("job: temporal %q experiment %q running %t", v.TemporalURL, v.Experiment, v.Running)
	}
}

func TestAPIJobs(t *testing.T) {
	ts := testServer(t, fakeMetrics{now: t0}, fakeWorkers{})
	code, _, body := get(t, ts.URL+"/api/jobs")
	if code != http.StatusOK {
		t.Fatalf("GET /api/jobs: %d\n%s", code, body)
	}
	var list JobList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range list.Jobs {
		got = append(got, j.ID)
	}
	// Running first (j has the latest row), then by last metrics.
	if strings.Join(got, ",") != "j,other,old" {
		t.Fatalf("jobs %v, want j, other, old", got)
	}
	if j := list.Jobs[0]; j.Tasks != 4 || strings.Join(j.Workers, ",") != "w1,w2,w3" || j.Experiment != "counter-exp" {
		t.Errorf("job j: %+v", j)
	}
	if old := list.Jobs[2]; old.Running || old.Tasks != 0 {
		t.Errorf("job old: %+v, want not running", old)
	}
}

func TestPagesAndErrors(t *testing.T) {
	ts := testServer(t, fakeMetrics{now: t0}, fakeWorkers{})
	tests := []struct {
		path, wantType string
		wantCode       int
		wantBody       []string
	}{
		{"/", "text/html; charset=utf-8", 200, []string{`href="/jobs/j"`, `data-src="/live"`, "/assets/uPlot.iife.min.js"}},
		{"/live", "text/html; charset=utf-8", 200, []string{`data-job="old" data-running="false"`}},
		{"/jobs/j", "text/html; charset=utf-8", 200, []string{`data-src="/jobs/j/live"`, `data-operator="counter" data-tasks="2"`,
			`data-status="migrating"`, `data-key="rate/counter-0"`, `"rate/counter-0":[[`, "worker w3"}},
		{"/jobs/j/live", "text/html; charset=utf-8", 200, []string{`id="reconfig"`, "await-migration"}},
		{"/jobs/nope", "text/html; charset=utf-8", 404, nil},
		{"/api/jobs/nope", "application/json", 404, []string{`"error": "job nope not found"`}},
		{"/api/jobs/j/reconfigs", "application/json", 200, []string{`"id": "j-reconfig-1"`}},
		{"/assets/uPlot.iife.min.js", "text/javascript; charset=utf-8", 200, []string{"uPlot"}},
		{"/assets/app.js", "text/javascript; charset=utf-8", 200, []string{"new uPlot("}},
		{"/healthz", "text/plain; charset=utf-8", 200, []string{"ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			code, ctype, body := get(t, ts.URL+tt.path)
			if code != tt.wantCode || ctype != tt.wantType {
				t.Fatalf("GET %s: %d %q, want %d %q\n%.500s", tt.path, code, ctype, tt.wantCode, tt.wantType, body)
			}
			for _, w := range tt.wantBody {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s lacks %q", tt.path, w)
				}
			}
		})
	}
}

// Without ClickHouse or without workers the view shows what the other
// source knows, and names the failure.
func TestDegradedSources(t *testing.T) {
	down := testServer(t, fakeMetrics{now: t0, err: errors.New("connection refused")}, fakeWorkers{})
	_, _, body := get(t, down.URL+"/api/jobs/j")
	var v JobView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Operators) != 2 || !strings.Contains(strings.Join(v.Problems, ";"), "ClickHouse: connection refused") {
		t.Errorf("ClickHouse down: %d operators, problems %q; want the workers' 2 and the error", len(v.Operators), v.Problems)
	}

	noWorkers := testServer(t, fakeMetrics{now: t0}, nil)
	_, _, body = get(t, noWorkers.URL+"/api/jobs/j")
	v = JobView{}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Running || v.Tasks != 4 || len(v.Operators) != 3 {
		t.Errorf("no workers: running %t, %d tasks in %d operators; want the 4 tasks with recent rows", v.Running, v.Tasks, len(v.Operators))
	}
}
