package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
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

// HandoffReport is what Handoff measured.
type HandoffReport struct {
	// StartedAt is the controller's clock right before the first handoff
	// request went out (of the attempt that succeeded). With Eager the new
	// owners start pulling the moved buckets from here on, so it is the
	// start of a bulk state move (AwaitMigrationInput.MoveStart).
	StartedAt time.Time `json:"started_at,omitzero"`
}

// Handoff makes every old owner hand its lookup entries to the new owners
// and returns once each new owner has installed them, so that exactly one
// task writes each key before any upstream routes to the new owners.
func (a *Activities) Handoff(ctx context.Context, in HandoffInput) (HandoffReport, error) {
	var rep HandoffReport
	err := a.step(ctx, in.Step, func() error {
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
				rep.StartedAt = time.Now()
				// All workers at once: each old owner's handoff stands alone,
				// and one after another the last worker's move started a
				// request round trip per worker later (~12 ms each on a bulk
				// move of 1.2 MB that takes ~90 ms).
				return a.onWorkersConcurrently(ctx, in.Previous, oldOwners, control.VerbHandoff, in.Step.ReconfigID, func(ids []string) any {
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
	return rep, err
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
	// MoveStart is when a bulk state move began: the StartedAt of the
	// eager handoff right before this await (stop-and-restart, DRRS). Zero
	// for a lazy migration, which runs while records flow.
	MoveStart time.Time `json:"move_start,omitzero"`
}

// MigrationReport is what AwaitMigration measured.
type MigrationReport struct {
	// Bytes is the keyed state (key + value bytes) the listed tasks pulled
	// for this reconfiguration, summed from their "migrated" events.
	Bytes uint64 `json:"bytes"`
	// Millis is how long the move took; Since says from when:
	//
	//   - MoveSinceHandoff (MoveStart set): from MoveStart, the eager
	//     handoff's first request, to the end of the last listed task's
	//     move — when its "migrated" event reached this activity, or, for a
	//     task that was done before this activity listened, the worker's
	//     time stamp in that event (a worker without one: when the status
	//     check saw the task done). Bytes / Millis is the bulk move's rate.
	//   - MoveSinceAwait: this activity's own duration (lazy: the values
	//     started moving at the fast-forward and moved while records
	//     flowed, so Bytes / Millis is no transfer rate).
	Millis float64 `json:"millis"`
	Since  string  `json:"since,omitempty"`
	// Summary is Bytes and Millis for a person, e.g. "12.3 MB in 0.16 s
	// (77 MB/s)"; the Temporal UI shows it in the step's result.
	Summary string `json:"summary,omitempty"`
}

// What MigrationReport.Millis counts from.
const (
	MoveSinceHandoff = "handoff"
	MoveSinceAwait   = "await"
)

// AwaitMigration returns once every listed task reported that all keys it
// took over in this reconfiguration (Step.ReconfigID) are local, with the
// bytes they pulled and how long the move took. It listens to the tasks'
// progress events; a status check right after subscribing (and every few
// seconds) catches tasks that finished before.
func (a *Activities) AwaitMigration(ctx context.Context, in AwaitMigrationInput) (MigrationReport, error) {
	start := time.Now()
	// Per task: the bytes of its "migrated" event and when its move ended.
	type end struct {
		bytes uint64
		at    time.Time
	}
	ends := map[string]end{}
	err := a.step(ctx, in.Step, func() error {
		dep := in.Deployment
		want := map[string]bool{}
		for _, id := range in.Tasks {
			want[id] = true
		}
		// emptyBefore: tasks a status check saw with an empty lookup table
		// but no "migrated" report of this reconfiguration yet.
		emptyBefore := map[string]bool{}
		return a.awaitProgress(ctx, dep.Job.JobID, in.TimeoutSecs, want,
			func(ev control.MigrationProgress) string {
				// A task that also gained keys in an earlier reconfiguration
				// of the job may report that one's end late: it says nothing
				// about the keys this one handed over.
				// (DRRS subscales share the reconfiguration id: only the
				// listed tasks' reports are this await's.)
				if ev.Event == control.EventMigrated && ev.ReconfigID == in.Step.ReconfigID && slices.Contains(in.Tasks, ev.TaskID) {
					ends[ev.TaskID] = end{bytes: ev.Bytes, at: time.Now()}
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
					// A task that still owes a report is not done even
					// with an empty table: its last chunk may still be
					// dropping keys at an old owner that finalize stops.
					if s.KLTSize != 0 || s.MigrationOwed != "" || !want[s.TaskID] {
						continue
					}
					// Done by now at the latest.
					e := end{at: time.Now()}
					m := s.Migrated
					switch {
					case m != nil && m.ReconfigID == in.Step.ReconfigID:
						// Done before we listened: its event is gone, its
						// report is in the status.
						e.bytes = m.Bytes
						if m.At > 0 {
							e.at = time.Unix(0, m.At)
						}
					case m != nil && !emptyBefore[s.TaskID]:
						// Its report of this reconfiguration is on its
						// way (the table just emptied): wait for it, or
						// for the next check.
						emptyBefore[s.TaskID] = true
						continue
					}
					// Without a report (a worker that does not keep one)
					// the task is done all the same, its bytes unknown.
					ends[s.TaskID] = e
					done(s.TaskID)
				}
				return nil
			})
	})
	rep := MigrationReport{Since: MoveSinceAwait, Millis: msSince(start, time.Now())}
	last := in.MoveStart // the end of the last task's move
	for _, e := range ends {
		rep.Bytes += e.bytes
		if e.at.After(last) {
			last = e.at
		}
	}
	if !in.MoveStart.IsZero() {
		rep.Since = MoveSinceHandoff
		rep.Millis = msSince(in.MoveStart, last)
	}
	rep.Summary = MoveSummary(rep.Bytes, rep.Millis, rep.Since == MoveSinceHandoff)
	return rep, err
}

func msSince(from, to time.Time) float64 {
	return max(0, float64(to.Sub(from).Microseconds())/1e3)
}

// MoveSummary renders a state move for a person: "12.3 MB in 0.16 s
// (77 MB/s)" for a bulk move (rate = bytes / millis), "3.4 MB migrated,
// await 2.10 s" for a lazy one (no rate: records kept flowing).
func MoveSummary(bytes uint64, millis float64, bulk bool) string {
	if !bulk {
		return fmt.Sprintf("%s migrated, await %.2f s", BytesText(float64(bytes)), millis/1000)
	}
	return fmt.Sprintf("%s in %.2f s (%s)", BytesText(float64(bytes)), millis/1000, RateText(float64(bytes), millis))
}

// BytesText renders a byte count in B, KB, MB or GB (powers of 1000).
func BytesText(b float64) string {
	switch {
	case math.IsNaN(b) || math.IsInf(b, 0):
		return "n/a"
	case b < 1000:
		return fmt.Sprintf("%.0f B", b)
	case b < 1e6:
		return fmt.Sprintf("%.1f KB", b/1e3)
	case b < 1e9:
		return fmt.Sprintf("%.1f MB", b/1e6)
	}
	return fmt.Sprintf("%.2f GB", b/1e9)
}

// RateText is bytes over millis in MB/s (10^6 bytes per second); "n/a"
// without a positive duration.
func RateText(bytes, millis float64) string {
	if !(millis > 0) || math.IsNaN(bytes) || math.IsInf(bytes, 0) {
		return "n/a"
	}
	r := bytes / 1e6 / (millis / 1000)
	if r < 10 {
		return fmt.Sprintf("%.2f MB/s", r)
	}
	return fmt.Sprintf("%.0f MB/s", r)
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

// onWorkersConcurrently is onWorkersOf with every worker's request in
// flight at once, for verbs whose requests do not depend on each other's
// order. Every request runs to its end; the errors are joined.
func (a *Activities) onWorkersConcurrently(ctx context.Context, dep control.Deployment, ids []string, verb, reconfigID string, body func(ids []string) any) error {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	order, groups := tasksByWorker(dep, func(t control.TaskRef) bool { return want[t.ID] })
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, wid := range order {
		wg.Go(func() {
			errs[i] = a.request(ctx, wid, verb, dep.Job.JobID, reconfigID, body(groups[wid]), nil)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
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
