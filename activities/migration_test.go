package activities

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
)

// TestAwaitMigrationIgnoresOtherReconfigurations runs AwaitMigration for
// reconfiguration r-2 of a job against a stand-in worker whose task still
// holds lookup entries, and which publishes migrated events once the await
// listens: only an event of r-2 completes it, and only its bytes count. An
// event of the job's earlier reconfiguration r-1 (a late report) must be
// ignored.
func TestAwaitMigrationIgnoresOtherReconfigurations(t *testing.T) {
	const job, task = "job-1", "count-1"
	migrated := func(reconfig string, bytes uint64) control.MigrationProgress {
		return control.MigrationProgress{JobID: job, ReconfigID: reconfig, TaskID: task, Event: control.EventMigrated, Bytes: bytes}
	}
	cases := []struct {
		name      string
		events    []control.MigrationProgress
		wantErr   string // "" = completes
		wantBytes uint64
	}{
		{name: "stale only", events: []control.MigrationProgress{migrated("r-1", 100)}, wantErr: "still waiting for " + task},
		{name: "current", events: []control.MigrationProgress{migrated("r-2", 7)}, wantBytes: 7},
		{name: "stale then current", events: []control.MigrationProgress{migrated("r-1", 100), migrated("r-2", 7)}, wantBytes: 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, _ := startNATS(t)
			acts := &Activities{NC: connect(t, ns.ClientURL(), "controller")}
			worker := connect(t, ns.ClientURL(), "w1")
			var once sync.Once
			// The await's status check comes after it subscribed to the
			// job's progress, so events published here reach it.
			serveStatus(t, worker, func() []control.TaskStatus {
				once.Do(func() {
					for _, ev := range tc.events {
						data, _ := json.Marshal(ev)
						if err := worker.Publish(control.ProgressSubject(job), data); err != nil {
							t.Errorf("publish %+v: %v", ev, err)
						}
					}
				})
				return []control.TaskStatus{{TaskID: task, KLTSize: 3}}
			})
			dep := control.Deployment{Job: control.JobSpec{JobID: job}, Tasks: []control.TaskRef{{ID: task, Operator: "count", Index: 1, WorkerID: "w1"}}}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := acts.AwaitMigration(ctx, AwaitMigrationInput{
				Deployment: dep, Tasks: []string{task}, TimeoutSecs: 1,
				Step: StepInfo{JobID: job, ReconfigID: "r-2", Step: "await-migration"},
			})
			checkAwait(t, rep, err, tc.wantErr, tc.wantBytes)
		})
	}
}

// TestAwaitMigrationTimesTheMove: with MoveStart (an eager handoff's
// start) the report is a bulk move timed from it to the end of the last
// task's move. A task done before the await listened is read from its
// status: its "migrated" report of this reconfiguration gives its bytes
// and, stamped by the worker, its end. A task whose table is empty but
// whose latest report is of an earlier reconfiguration is not done yet:
// its report of this one arrives as an event.
func TestAwaitMigrationTimesTheMove(t *testing.T) {
	const job = "job-1"
	moveStart := time.Now().Add(-time.Second)
	early := control.MigrationProgress{JobID: job, ReconfigID: "r-2", TaskID: "count-1", Event: control.EventMigrated,
		Bytes: 5_000_000, At: moveStart.Add(100 * time.Millisecond).UnixNano()}
	stale := control.MigrationProgress{JobID: job, ReconfigID: "r-1", TaskID: "count-2", Event: control.EventMigrated, Bytes: 9_000_000}
	late := control.MigrationProgress{JobID: job, ReconfigID: "r-2", TaskID: "count-2", Event: control.EventMigrated, Bytes: 7_000_000}

	ns, _ := startNATS(t)
	acts := &Activities{NC: connect(t, ns.ClientURL(), "controller")}
	worker := connect(t, ns.ClientURL(), "w1")
	var once sync.Once
	_, err := worker.Subscribe(control.WorkerSubject("w1", control.VerbStatus), func(m *nats.Msg) {
		body, _ := json.Marshal(control.StatusReply{WorkerID: "w1", Tasks: []control.TaskStatus{
			{TaskID: "count-1", Migrated: &early},
			{TaskID: "count-2", Migrated: &stale},
		}})
		reply, _ := json.Marshal(control.Reply{Version: control.Version, Body: body})
		_ = m.Respond(reply)
		// count-2 reports this reconfiguration's end once the await has
		// seen its stale status.
		once.Do(func() {
			data, _ := json.Marshal(late)
			if err := worker.Publish(control.ProgressSubject(job), data); err != nil {
				t.Errorf("publish: %v", err)
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Flush(); err != nil {
		t.Fatal(err)
	}
	dep := control.Deployment{Job: control.JobSpec{JobID: job}, Tasks: []control.TaskRef{
		{ID: "count-1", Operator: "count", Index: 1, WorkerID: "w1"}, {ID: "count-2", Operator: "count", Index: 2, WorkerID: "w1"},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := time.Now()
	rep, err := acts.AwaitMigration(ctx, AwaitMigrationInput{
		Deployment: dep, Tasks: []string{"count-1", "count-2"}, TimeoutSecs: 10, MoveStart: moveStart,
		Step: StepInfo{JobID: job, ReconfigID: "r-2", Step: "await-migration"},
	})
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bytes != 12_000_000 || rep.Since != MoveSinceHandoff {
		t.Fatalf("report %+v: want 12000000 bytes (not the stale 9000000) of a bulk move", rep)
	}
	// The move ended when count-2's event arrived: after the await began.
	if lo, hi := float64(before.Sub(moveStart).Milliseconds()), float64(after.Sub(moveStart).Milliseconds())+1; rep.Millis < lo || rep.Millis > hi {
		t.Fatalf("move took %.1f ms, want between %.0f and %.0f", rep.Millis, lo, hi)
	}
	if !strings.HasPrefix(rep.Summary, "12.0 MB in ") || !strings.HasSuffix(rep.Summary, " MB/s)") {
		t.Fatalf("summary %q", rep.Summary)
	}

	// Every task done before the await listened: the move ended at the
	// worker's stamp, not when the await looked.
	rep, err = acts.AwaitMigration(ctx, AwaitMigrationInput{
		Deployment: dep, Tasks: []string{"count-1"}, TimeoutSecs: 10, MoveStart: moveStart,
		Step: StepInfo{JobID: job, ReconfigID: "r-2", Step: "await-migration"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bytes != 5_000_000 || rep.Since != MoveSinceHandoff || rep.Millis != 100 || rep.Summary != "5.0 MB in 0.10 s (50 MB/s)" {
		t.Fatalf("report %+v: want 5 MB in the 100 ms to count-1's stamp", rep)
	}

	// Without MoveStart (lazy): the await's own time, no rate.
	rep, err = acts.AwaitMigration(ctx, AwaitMigrationInput{
		Deployment: dep, Tasks: []string{"count-1"}, TimeoutSecs: 10,
		Step: StepInfo{JobID: job, ReconfigID: "r-2", Step: "await-migration"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bytes != 5_000_000 || rep.Since != MoveSinceAwait || rep.Millis > float64(time.Since(after).Milliseconds())+1 ||
		!strings.HasPrefix(rep.Summary, "5.0 MB migrated, await ") {
		t.Fatalf("lazy report %+v", rep)
	}
}

func TestMoveSummary(t *testing.T) {
	for _, tc := range []struct {
		bytes  uint64
		millis float64
		bulk   bool
		want   string
	}{
		{12_300_000, 160, true, "12.3 MB in 0.16 s (77 MB/s)"},
		{800_000, 400, true, "800.0 KB in 0.40 s (2.00 MB/s)"},
		{3_400_000, 2100, false, "3.4 MB migrated, await 2.10 s"},
		{0, 0, true, "0 B in 0.00 s (n/a)"},
	} {
		if got := MoveSummary(tc.bytes, tc.millis, tc.bulk); got != tc.want {
			t.Errorf("MoveSummary(%d, %v, %v) = %q, want %q", tc.bytes, tc.millis, tc.bulk, got, tc.want)
		}
	}
}

// TestAwaitMigrationWaitsForTheOwedReport: a task whose lookup table is
// already empty but which still owes this reconfiguration's "migrated"
// report (a last chunk may still be dropping keys at an old owner that
// finalize then stops) is not done, even on its first gain, when it has no
// earlier report. Once the status shows the report, it is.
func TestAwaitMigrationWaitsForTheOwedReport(t *testing.T) {
	const job, task, reconfig = "job-1", "count-0", "r-2"
	cases := []struct {
		name      string
		owedFor   int // status replies that still owe the report
		wantErr   string
		wantBytes uint64
	}{
		{name: "owed throughout", owedFor: 1 << 30, wantErr: "still waiting for " + task},
		{name: "owed, then reported", owedFor: 1, wantBytes: 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns, _ := startNATS(t)
			acts := &Activities{NC: connect(t, ns.ClientURL(), "controller")}
			worker := connect(t, ns.ClientURL(), "w1")
			var mu sync.Mutex
			replies := 0
			serveStatus(t, worker, func() []control.TaskStatus {
				mu.Lock()
				defer mu.Unlock()
				replies++
				if replies > tc.owedFor {
					return []control.TaskStatus{{TaskID: task, Migrated: &control.MigrationProgress{JobID: job, ReconfigID: reconfig, TaskID: task, Event: control.EventMigrated, Bytes: 9}}}
				}
				return []control.TaskStatus{{TaskID: task, MigrationOwed: reconfig}}
			})
			dep := control.Deployment{Job: control.JobSpec{JobID: job}, Tasks: []control.TaskRef{{ID: task, Operator: "count", Index: 0, WorkerID: "w1"}}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := acts.AwaitMigration(ctx, AwaitMigrationInput{
				Deployment: dep, Tasks: []string{task}, TimeoutSecs: 5,
				Step: StepInfo{JobID: job, ReconfigID: reconfig, Step: "await-migration"},
			})
			checkAwait(t, rep, err, tc.wantErr, tc.wantBytes)
		})
	}
}

// serveStatus answers the status requests to worker w1 with the tasks
// status gives (called once per request).
func serveStatus(t *testing.T, worker *nats.Conn, status func() []control.TaskStatus) {
	t.Helper()
	_, err := worker.Subscribe(control.WorkerSubject("w1", control.VerbStatus), func(m *nats.Msg) {
		body, _ := json.Marshal(control.StatusReply{WorkerID: "w1", Tasks: status()})
		reply, _ := json.Marshal(control.Reply{Version: control.Version, Body: body})
		_ = m.Respond(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Flush(); err != nil {
		t.Fatal(err)
	}
}

// checkAwait compares an AwaitMigration outcome with the wanted error
// ("" = none) or bytes.
func checkAwait(t *testing.T, rep MigrationReport, err error, wantErr string, wantBytes uint64) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("AwaitMigration = %+v, %v; want an error containing %q", rep, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bytes != wantBytes {
		t.Errorf("reported %d bytes moved, want %d", rep.Bytes, wantBytes)
	}
}
