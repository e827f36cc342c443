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
			_, err := worker.Subscribe(control.WorkerSubject("w1", control.VerbStatus), func(m *nats.Msg) {
				once.Do(func() {
					for _, ev := range tc.events {
						data, _ := json.Marshal(ev)
						if err := worker.Publish(control.ProgressSubject(job), data); err != nil {
							t.Errorf("publish %+v: %v", ev, err)
						}
					}
				})
				body, _ := json.Marshal(control.StatusReply{WorkerID: "w1", Tasks: []control.TaskStatus{{TaskID: task, KLTSize: 3}}})
				reply, _ := json.Marshal(control.Reply{Version: control.Version, Body: body})
				_ = m.Respond(reply)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := worker.Flush(); err != nil {
				t.Fatal(err)
			}
			dep := control.Deployment{Job: control.JobSpec{JobID: job}, Tasks: []control.TaskRef{{ID: task, Operator: "count", Index: 1, WorkerID: "w1"}}}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rep, err := acts.AwaitMigration(ctx, AwaitMigrationInput{
				Deployment: dep, Tasks: []string{task}, TimeoutSecs: 1,
				Step: StepInfo{JobID: job, ReconfigID: "r-2", Step: "await-migration"},
			})

			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("AwaitMigration = %+v, %v; want an error containing %q", rep, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Bytes != tc.wantBytes {
				t.Errorf("reported %d bytes moved, want %d", rep.Bytes, tc.wantBytes)
			}
		})
	}
}
