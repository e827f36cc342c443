package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
)

// HandoffInput starts the fast-forward of a lazy reconfiguration.
type HandoffInput struct {
	Deployment control.Deployment `json:"deployment"` // the new deployment
	Previous   control.Deployment `json:"previous"`   // the old one: where old owners live
	// Pairs lists every (old owner → new owner) handoff the plan implies.
	Pairs []OwnerPair `json:"pairs"`
	Eager bool        `json:"eager"` // new owners pull all keys at once (stop-and-restart)
	// Ordered keeps per-key order across an eager handoff whose routes are
	// swapped in band afterwards (DRRS); see control.HandoffRequest.
	Ordered     bool     `json:"ordered,omitempty"`
	TimeoutSecs float64  `json:"timeout_secs"`
	Step        StepInfo `json:"step"`
	// Operator is the reconfigured operator; workers refuse a handoff on a
	// task of another one (empty: not checked).
	Operator string `json:"operator,omitempty"`
}

// OwnerPair is one bucket handoff between two tasks.
type OwnerPair struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Handoff makes every old owner hand its lookup entries to the new owners
// and returns once each new owner has installed them, so that exactly one
// task writes each key before any upstream routes to the new owners.
func (a *Activities) Handoff(ctx context.Context, in HandoffInput) error {
	return a.step(ctx, in.Step, func() error {
		dep := in.Deployment
		want := map[string]bool{}
		var oldOwners []string
		seenOld := map[string]bool{}
		for _, p := range in.Pairs {
			want[p.From+">"+p.To] = true
			if !seenOld[p.From] {
				seenOld[p.From] = true
				oldOwners = append(oldOwners, p.From)
			}
		}
		return a.awaitProgress(ctx, dep.Job.JobID, in.TimeoutSecs, want,
			func(ev control.MigrationProgress) string {
				if ev.Event == control.EventKLTInstalled && ev.ReconfigID == in.Step.ReconfigID {
					return ev.From + ">" + ev.TaskID
				}
				return ""
			},
			func() error {
				mode := ""
				if in.Eager {
					mode = "eager"
				}
				return a.onWorkersOf(ctx, in.Previous, oldOwners, control.VerbHandoff, in.Step.ReconfigID, func(ids []string) any {
					return control.HandoffRequest{Deployment: dep, TaskIDs: ids, Mode: mode, Operator: in.Operator, Ordered: in.Ordered}
				})
			},
			// A retry after a controller crash may have missed the events:
			// the new owners also report the handoffs they completed.
			func(done func(string)) error {
				st, err := a.taskStatus(ctx, dep, newOwners(in.Pairs))
				if err != nil {
					return err
				}
				prefix := in.Step.ReconfigID + "/"
				for _, s := range st {
					for _, h := range s.KLTInstalled {
						if strings.HasPrefix(h, prefix) {
							done(strings.TrimPrefix(h, prefix) + ">" + s.TaskID)
						}
					}
				}
				return nil
			})
	})
}

func newOwners(pairs []OwnerPair) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range pairs {
		if !seen[p.To] {
			seen[p.To] = true
			out = append(out, p.To)
		}
	}
	return out
}

// AwaitMigrationInput names the new owners whose lookup tables must drain.
type AwaitMigrationInput struct {
	Deployment  control.Deployment `json:"deployment"`
	Tasks       []string           `json:"tasks"`
	TimeoutSecs float64            `json:"timeout_secs"`
	Step        StepInfo           `json:"step"`
}

// MigrationReport is what AwaitMigration measured.
type MigrationReport struct {
	Bytes uint64 `json:"bytes"`
}

// AwaitMigration returns once every listed task reported that all keys it
// took over in this reconfiguration (Step.ReconfigID) are local. It listens
// to the tasks' progress events; a status check right after subscribing
// catches tasks that finished before.
func (a *Activities) AwaitMigration(ctx context.Context, in AwaitMigrationInput) (MigrationReport, error) {
	var rep MigrationReport
	err := a.step(ctx, in.Step, func() error {
		dep := in.Deployment
		want := map[string]bool{}
		for _, id := range in.Tasks {
			want[id] = true
		}
		return a.awaitProgress(ctx, dep.Job.JobID, in.TimeoutSecs, want,
			func(ev control.MigrationProgress) string {
				// A task that also gained keys in an earlier reconfiguration
				// of the job may report that one's end late: it says nothing
				// about the keys this one handed over.
				if ev.Event == control.EventMigrated && ev.ReconfigID == in.Step.ReconfigID {
					rep.Bytes += ev.Bytes
					return ev.TaskID
				}
				return ""
			},
			func() error { return nil },
			func(done func(string)) error {
				st, err := a.taskStatus(ctx, dep, in.Tasks)
				if err != nil {
					return err
				}
				for _, s := range st {
					if s.KLTSize == 0 {
						done(s.TaskID)
					}
				}
				return nil
			})
	})
	return rep, err
}

// awaitProgress subscribes to a job's progress events, runs trigger, then
// waits until match has returned every key of want. Optional checks run
// right after the trigger (and every few seconds) and may mark keys done.
func (a *Activities) awaitProgress(ctx context.Context, jobID string, timeoutSecs float64, want map[string]bool,
	match func(control.MigrationProgress) string, trigger func() error, checks ...func(done func(string)) error) error {
	ch := make(chan *nats.Msg, 256)
	sub, err := a.NC.ChanSubscribe(control.ProgressSubject(jobID), ch)
	if err != nil {
		return fmt.Errorf("subscribe to progress of job %s: %w", jobID, err)
	}
	defer sub.Unsubscribe()
	if err := a.NC.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("NATS flush: %w", err)
	}
	if err := trigger(); err != nil {
		return err
	}
	done := func(k string) { delete(want, k) }
	runChecks := func() error {
		for _, c := range checks {
			if err := c(done); err != nil {
				return err
			}
		}
		return nil
	}
	if err := runChecks(); err != nil {
		return err
	}
	timeout := time.Duration(timeoutSecs * float64(time.Second))
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	beat := time.NewTicker(2 * time.Second)
	defer beat.Stop()
	for len(want) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("job %s: still waiting for %s after %s", jobID, keys(want), timeout)
		case <-beat.C:
			heartbeat(ctx, keys(want))
			if err := runChecks(); err != nil {
				return err
			}
		case msg := <-ch:
			var ev control.MigrationProgress
			if json.Unmarshal(msg.Data, &ev) == nil {
				if k := match(ev); k != "" {
					done(k)
				}
			}
		}
	}
	return nil
}

// onWorkersOf sends one request per worker hosting any of ids.
func (a *Activities) onWorkersOf(ctx context.Context, dep control.Deployment, ids []string, verb, reconfigID string, body func(ids []string) any) error {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	order, groups := tasksByWorker(dep, func(t control.TaskRef) bool { return want[t.ID] })
	for _, wid := range order {
		if err := a.request(ctx, wid, verb, dep.Job.JobID, reconfigID, body(groups[wid]), nil); err != nil {
			return err
		}
	}
	return nil
}

func (a *Activities) taskStatus(ctx context.Context, dep control.Deployment, ids []string) ([]control.TaskStatus, error) {
	var out []control.TaskStatus
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	order, groups := tasksByWorker(dep, func(t control.TaskRef) bool { return want[t.ID] })
	for _, wid := range order {
		var st control.StatusReply
		if err := a.request(ctx, wid, control.VerbStatus, dep.Job.JobID, "", control.TasksRequest{TaskIDs: groups[wid]}, &st); err != nil {
			return nil, err
		}
		out = append(out, st.Tasks...)
	}
	return out, nil
}
