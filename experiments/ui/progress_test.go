package ui

import (
	"math"
	"testing"
	"time"

	"koala/dataplane/metrics"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestDecideStatus(t *testing.T) {
	quiet := 3 * time.Second
	step := func(name, phase string) StepView { return StepView{Name: name, Phase: phase} }
	tests := []struct {
		name       string
		steps      []StepView
		last, now  float64
		wantStatus string
		wantStep   string
	}{
		{"no steps yet, just began", nil, 10, 11, StatusRunning, ""},
		{"a step runs", []StepView{step("plan", "end"), step("deploy-tasks", "start")}, 10, 30, StatusRunning, "deploy-tasks"},
		{"await-migration runs", []StepView{step("swap-routes", "end"), step("await-migration", "start")}, 10, 30, StatusMigrating, "await-migration"},
		{"between steps", []StepView{step("plan", "end"), step("deploy-tasks", "end")}, 10, 11.5, StatusRunning, "deploy-tasks"},
		{"all ended, quiet", []StepView{step("plan", "end"), step("await-migration", "end")}, 10, 13, StatusDone, "await-migration"},
		{"a step failed", []StepView{step("plan", "end"), step("fast-forward", "error"), step("compensate-resume", "start")}, 10, 30, StatusFailed, "fast-forward"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, step := decideStatus(tt.steps, at(tt.last), at(tt.now), quiet)
			if status != tt.wantStatus || step != tt.wantStep {
				t.Errorf("decideStatus = %s, %q; want %s, %q", status, step, tt.wantStatus, tt.wantStep)
			}
		})
	}
}

func TestReconfigsFrom(t *testing.T) {
	ev := func(s float64, id, step, phase string) metrics.ReconfigEvent {
		return metrics.ReconfigEvent{Time: at(s), ReconfigID: id, Protocol: "lazy", Step: step, Phase: phase, Millis: 100, Detail: "boom"}
	}
	evs := []metrics.ReconfigEvent{
		ev(1, "j-reconfig-1", "plan", "start"), ev(1.1, "j-reconfig-1", "plan", "end"),
		ev(1.2, "j-reconfig-1", "swap-routes", "start"), ev(2, "j-reconfig-1", "swap-routes", "end"),
		ev(20, "j-reconfig-2", "plan", "start"), ev(20.1, "j-reconfig-2", "plan", "end"),
		ev(20.2, "j-reconfig-2", "fast-forward", "start"), ev(21, "j-reconfig-2", "fast-forward", "error"),
		ev(30, "j-reconfig-3", "plan", "start"),
	}
	got := reconfigsFrom(evs, at(31), 3*time.Second)
	if len(got) != 3 {
		t.Fatalf("%d reconfigurations, want 3: %+v", len(got), got)
	}
	want := []struct {
		id, status, step string
		steps            int
		seconds          float64
	}{
		{"j-reconfig-1", StatusDone, "swap-routes", 2, 1},
		{"j-reconfig-2", StatusFailed, "fast-forward", 2, 1},
		{"j-reconfig-3", StatusRunning, "plan", 1, 1},
	}
	for i, w := range want {
		r := got[i]
		if r.ID != w.id || r.Status != w.status || r.Step != w.step || len(r.Steps) != w.steps || math.Abs(r.Seconds-w.seconds) > 1e-6 || r.Protocol != "lazy" {
			t.Errorf("reconfiguration %d = %s %s step %q, %d steps, %.2f s; want %+v", i, r.ID, r.Status, r.Step, len(r.Steps), r.Seconds, w)
		}
	}
	if got[0].Progress != 1 || got[0].End.IsZero() {
		t.Errorf("done reconfiguration: progress %v, end %v; want 1 and its last event", got[0].Progress, got[0].End)
	}
	if got[1].Error != "fast-forward: boom" {
		t.Errorf("error = %q", got[1].Error)
	}
}

func TestAddMigration(t *testing.T) {
	row := func(s float64, task string, bytes, keys, klt uint64) metrics.TaskRow {
		return metrics.TaskRow{Time: at(s), Task: task, BytesTransferred: bytes, KeysFetched: keys, KLTSize: klt}
	}
	rows := []metrics.TaskRow{
		row(5, "counter-2", 999, 9, 0), // before the start: not this reconfiguration's
		row(10, "counter-2", 0, 0, 500), row(10, "counter-3", 0, 0, 500),
		row(11, "counter-2", 4000, 100, 400), row(11, "counter-3", 4000, 100, 400),
		row(12, "counter-2", 8000, 200, 200), row(12, "counter-3", 8000, 200, 200),
	}
	tests := []struct {
		name          string
		status        string
		keysLeft      int
		now           float64
		wantLeft      int
		wantPeak      int
		wantBytesLeft float64
		wantRate      float64
		wantProgress  float64
	}{
		// 400 keys left of 1000; 24000 B moved for 600 keys: 40 B a key;
		// 0, 8000 and 16000 B in the last three seconds.
		{"migrating, workers answer", StatusMigrating, 400, 13, 400, 1000, 16000, 8000, 0.6},
		{"migrating, no worker answers", StatusMigrating, -1, 13, 400, 1000, 16000, 8000, 0.6},
		{"rows stale: no rate", StatusMigrating, 400, 30, 400, 1000, 16000, 0, 0.6},
		{"done", StatusDone, 0, 13, 0, 1000, 0, 8000, 1},
		{"nothing moved yet", StatusRunning, 1000, 10.5, 1000, 1000, -1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ReconfigView{Start: at(10.4), Status: tt.status}
			rs := rows
			if tt.name == "nothing moved yet" {
				rs = rows[:3]
			}
			addMigration(&r, rs, tt.keysLeft, at(tt.now))
			if r.KeysLeft != tt.wantLeft || r.KeysPeak != tt.wantPeak || r.BytesLeft != tt.wantBytesLeft ||
				math.Abs(r.Rate-tt.wantRate) > 1e-6 || math.Abs(r.Progress-tt.wantProgress) > 1e-6 {
				t.Errorf("left %d peak %d bytes left %v rate %v progress %v; want %d %d %v %v %v",
					r.KeysLeft, r.KeysPeak, r.BytesLeft, r.Rate, r.Progress, tt.wantLeft, tt.wantPeak, tt.wantBytesLeft, tt.wantRate, tt.wantProgress)
			}
		})
	}
}
