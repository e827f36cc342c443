package dataplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// Aligned checkpoint barriers (Chandy–Lamport with alignment).
//
// A checkpoint starts at the sources: on VerbCheckpointInject each source
// task, on its own goroutine and so between two emitted batches, records
// the next offset of each of its partitions as its part of the checkpoint
// and sends a FrameCheckpoint to every downstream task. A task with
// several upstream tasks aligns: from the moment an upstream's barrier
// arrived, it holds that upstream's later frames (they belong after the
// cut) and goes on processing the others, until every upstream's barrier
// is in. Then it writes its part (keyed state as a Pebble checkpoint with
// its key lookup table, a sink's ledger and values), acks it in the
// store, forwards the barrier and processes the held frames in arrival
// order. Every record before the cut is thus in the state of exactly the
// parts written, and none after it; restoring all parts and rewinding the
// sources to the recorded offsets replays exactly the records after the cut.
//
// Checkpoints and reconfigurations. A checkpoint never captures a
// half-moved key, and it may be taken while a lazy migration still has
// keys to fetch (under fetch-on-demand that can be for the rest of the
// job). The rule:
//
//   - A task's part is refused (the ack carries the error, the checkpoint
//     fails and the next one is tried) only while a short migration step
//     touches it: route gates or drains open, a handoff of lookup entries
//     not yet installed by the new owner (the old owner keeps a mark from
//     the handoff until the new owner's ack, and also refuses a checkpoint
//     the new owner wrote its part of before installing: handoff_ack.go),
//     or lookup entries naming a task that is no longer one of the
//     operator's (a removed task writes no part). See migrationInProgress.
//   - Key lookup table entries do not refuse. A new owner's part holds its
//     table (the keys still remote, with their owners); an old owner's part
//     holds its store, where a key stays until it is fetched, plus its
//     served log: every value it handed out to a task that had already
//     written its part of this checkpoint (or a later one), which that
//     task's part lists as remote although the store here no longer holds
//     it (checkpoint_klt.go). Fetches carry the fetcher's last checkpoint
//     for that, the log is recorded before the store's delete and written
//     after the store's checkpoint, so every key a new owner's part lists
//     as remote is in the old owner's part of the same checkpoint.
//   - Restore is eager (checkpoint_restore.go): a task copies each key its
//     part's table names under an owner from that owner's part — unless
//     the task's own part holds the key, which means it fetched the key
//     before its barrier and the owner's copy is stale — starts with an
//     empty table, and drops the keys of buckets it does not own. Every key
//     is thus in exactly one restored task, with its value at the cut, and
//     restored tasks serve no fetches.
//
// The controller also does not start a checkpoint while a reconfiguration
// workflow is before its routing swap (workflows/run_checkpoints.go,
// run_checkpoints_migration.go), so checkpoints are not wasted on
// refusals; the checks here are what make the rule hold whatever the
// controller does.

// checkpointState is a task's side of checkpoints; owned by the task goroutine.
type checkpointState struct {
	align *checkpointAlign // the barrier being aligned, if any
	// aborted are the last checkpoints given up here: their late barriers
	// are dropped, or they would start an alignment that never ends.
	aborted []string
}

func (c *checkpointState) abort(id string) {
	if !slices.Contains(c.aborted, id) {
		c.aborted = append(c.aborted, id)
		if len(c.aborted) > 8 {
			c.aborted = c.aborted[1:]
		}
	}
}

// checkpointAlign is a task's alignment on one checkpoint barrier.
type checkpointAlign struct {
	id    string
	seen  map[string]bool // upstream tasks whose barrier arrived
	held  []*wire.Frame   // their later frames, in arrival order
	start time.Time
	// bytes is what held takes (recordsBytes); paused are the senders
	// held back since it reached ReconfigHoldMaxBytes.
	bytes  int
	paused map[string]control.TaskRef
}

// holdForCheckpoint keeps f for after the checkpoint when its sender
// already sent the barrier being aligned.
//
// The frames kept are bounded like a new owner's held records
// (route_hold.go): past ReconfigHoldMaxBytes the task holds the sender,
// which then waits before handing it more. A source's frames need no hold
// (they are acknowledged only once processed, so its credit bounds them)
// but get one all the same: it costs nothing and bounds the frames already
// granted. Holding a sender cannot keep a barrier from arriving: it sent
// its barrier here, so it aligned on its own upstreams, each of which sent
// its barrier to all of its downstreams at once, this task included, before
// any later frame.
func (t *task) holdForCheckpoint(f *wire.Frame) bool {
	a := t.ckpt.align
	if a == nil || f.FromTask == "" || !a.seen[f.FromTask] || f.Kind == wire.FrameControl {
		return false
	}
	a.held = append(a.held, f)
	a.bytes += recordsBytes(f.Records)
	if _, held := a.paused[f.FromTask]; held || a.bytes < t.holdBytes() {
		return true
	}
	if ref, ok := t.srcRefs.lookup(t.view.Load(), f.FromTask); ok {
		t.holdSender(ref, holdForAlignment)
		if a.paused == nil {
			a.paused = map[string]control.TaskRef{}
		}
		a.paused[f.FromTask] = ref
		t.w.log.Debug("holding a sender: frames held for a checkpoint alignment reached the bound",
			"task", t.id, "sender", f.FromTask, "checkpoint", a.id, "held_bytes", a.bytes, "bound", t.holdBytes())
	}
	return true
}

// releaseAlignmentSenders lifts the holds of the alignment in progress.
func (t *task) releaseAlignmentSenders() {
	if a := t.ckpt.align; a != nil {
		for s, ref := range a.paused {
			t.unholdSender(ref, holdForAlignment)
			delete(a.paused, s)
		}
	}
}

// onCheckpointBarrier aligns checkpoint barrier f; when every upstream
// sent it, the task writes its part, forwards the barrier and processes
// what it held.
func (t *task) onCheckpointBarrier(ctx context.Context, view *taskView, f *wire.Frame) error {
	if slices.Contains(t.ckpt.aborted, f.BarrierID) {
		return nil
	}
	if a := t.ckpt.align; a != nil && a.id != f.BarrierID {
		// The sender skipped the checkpoint being aligned (its source never
		// injected it): that one cannot complete any more.
		t.w.log.Warn("checkpoint abandoned: a newer barrier arrived first", "task", t.id, "checkpoint", a.id, "newer", f.BarrierID, "from", f.FromTask)
		t.commitCheckpointAck(ctx, view, a.id, control.CheckpointTaskAck{Error: fmt.Sprintf("abandoned: barrier %s arrived from %s first", f.BarrierID, f.FromTask)})
		t.ckpt.abort(a.id)
		if err := t.releaseCheckpointHold(ctx); err != nil {
			return err
		}
	}
	if t.ckpt.align == nil {
		t.ckpt.align = &checkpointAlign{id: f.BarrierID, seen: map[string]bool{}, start: time.Now()}
	}
	a := t.ckpt.align
	a.seen[f.FromTask] = true
	for _, up := range view.upstreams {
		if !a.seen[up] {
			return nil
		}
	}
	align := time.Since(a.start)
	t.dead.Flush(ctx) // rejected records before the cut leave before the barrier
	ack := t.writeCheckpointPart(ctx, view, a.id)
	ack.AlignMillis = millis(align)
	t.commitCheckpointAck(ctx, view, a.id, ack)
	if err := broadcast(ctx, t.w, view, t.jobID, t.id, wire.FrameCheckpoint, a.id); err != nil {
		return err
	}
	return t.releaseCheckpointHold(ctx)
}

// releaseCheckpointHold ends the alignment and processes the held frames;
// one of them may start the next alignment, which holds the rest of its
// sender's frames again.
func (t *task) releaseCheckpointHold(ctx context.Context) error {
	a := t.ckpt.align
	if a == nil {
		return nil
	}
	t.releaseAlignmentSenders()
	t.ckpt.align = nil
	for i, f := range a.held {
		if err := t.handleFrame(ctx, f); err != nil {
			a.held = a.held[i+1:]
			return err
		}
	}
	return nil
}

// writeCheckpointPart saves the task's state for checkpoint id and returns
// its ack (with Error set when it could not).
func (t *task) writeCheckpointPart(ctx context.Context, view *taskView, id string) control.CheckpointTaskAck {
	start := time.Now()
	ack := control.CheckpointTaskAck{Kind: "stateless"}
	fail := func(err error) control.CheckpointTaskAck {
		ack.Error = err.Error()
		return ack
	}
	if t.keyed == nil && t.spec.Stateful {
		return fail(fmt.Errorf("operator %q keeps state outside the keyed state runtime, which checkpoints cannot capture yet", t.opName))
	}
	if t.keyed == nil && t.ledger == nil {
		return ack
	}
	if t.keyed != nil {
		// Whatever becomes of this part, no part from this checkpoint on
		// needs what was served to tasks not past it.
		defer t.keyed.served.prune(id)
	}
	if why := t.migrationInProgress(view, id); why != "" {
		return fail(fmt.Errorf("a reconfiguration's migration is in progress on this task (%s); checkpoints wait until this step has ended", why))
	}
	store, err := checkpoint.Open(view.job.Params[control.ParamCheckpointStore])
	if err != nil {
		return fail(err)
	}
	dir, err := store.TaskDir(t.jobID, id, t.id)
	if err != nil {
		return fail(err)
	}
	ack.Kind = ""
	if t.keyed != nil {
		// No background commit between the store's capture, the table's
		// and the new last checkpoint (migrator.go).
		var snap control.TaskSnapshot
		var served uint64
		err := t.keyed.mig.holdCommits(func() error {
			var err error
			if snap, err = t.saveSnapshotTo(dir, false); err != nil {
				return err
			}
			if served, err = t.keyed.saveServed(dir, id); err != nil {
				return err
			}
			t.keyed.setLastCheckpoint(id)
			return nil
		})
		if err != nil {
			return fail(fmt.Errorf("keyed state: %w", err))
		}
		ack.Kind, ack.Bytes = "keyed", snap.Bytes+served
	}
	if t.ledger != nil {
		n, err := t.saveSinkState(dir)
		if err != nil {
			return fail(err)
		}
		ack.Kind = joinKind(ack.Kind, "sink")
		ack.Bytes += n
	}
	if tp, ok := t.twoPhase(); ok {
		n, err := tp.preCommit(ctx, id, dir) // checkpoint_commit.go
		if err != nil {
			return fail(err)
		}
		ack.Kind = joinKind(ack.Kind, "txn")
		ack.Bytes += n
	}
	ack.SnapshotMillis = millis(time.Since(start))
	return ack
}

func joinKind(a, b string) string {
	if a == "" {
		return b
	}
	return a + "+" + b
}

// migrationInProgress says what migration step touches the task and
// keeps its part of checkpoint id from being written, or "". Keys still
// to fetch from tasks of the operator do not (see the rule above).
func (t *task) migrationInProgress(view *taskView, id string) string {
	switch {
	case t.gates != nil && len(t.gates.from) > 0:
		return "route gates open"
	case t.gates != nil && len(t.gates.after) > 0:
		return "output of a new owner held for an old owner's handoff marker"
	case len(t.drainTo) > 0:
		return "route drains open"
	case t.out.handoffSending():
		return "lookup table handoff being sent"
	}
	if why := t.handoffs.refusal(id); why != "" {
		return why // handoff_ack.go
	}
	if o := t.kltOwnersOutside(view); o != "" {
		return fmt.Sprintf("keys still to fetch from %s, no longer a task of %s", o, t.opName)
	}
	return ""
}

// commitCheckpointAck records ack in the store; a failure to do so is
// logged (the checkpoint then times out, which the controller reports).
func (t *task) commitCheckpointAck(ctx context.Context, view *taskView, id string, ack control.CheckpointTaskAck) {
	ack.TaskID, ack.Operator = t.id, t.opName
	store, err := checkpoint.Open(view.job.Params[control.ParamCheckpointStore])
	if err == nil {
		err = store.CommitTask(ctx, t.jobID, id, ack)
	}
	if err != nil {
		t.w.log.Error("checkpoint ack", "task", t.id, "checkpoint", id, "err", err)
	}
	if ack.Error != "" {
		t.w.log.Warn("checkpoint part refused", "task", t.id, "checkpoint", id, "reason", ack.Error)
	}
}

// injectCheckpoint runs on a source goroutine: it records the partitions'
// next offsets as the source's part and emits the barrier after every
// record emitted so far.
func (t *task) injectCheckpoint(ctx context.Context, id string) (map[int32]int64, error) {
	view := t.view.Load()
	offsets := t.source.Positions()
	store, err := checkpoint.Open(view.job.Params[control.ParamCheckpointStore])
	if err != nil {
		return nil, err
	}
	if ack, ok, err := store.TaskAck(ctx, t.jobID, id, t.id); err != nil {
		return nil, err
	} else if ok {
		return ack.Offsets, nil // a retried injection: the barrier is already out
	}
	if dir, err := store.TaskDir(t.jobID, id, t.id); err != nil {
		return nil, err
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	} else if err := checkpoint.WriteJSONAtomic(filepath.Join(dir, checkpoint.SourceFile), offsets); err != nil {
		return nil, err
	}
	if err := store.CommitTask(ctx, t.jobID, id, control.CheckpointTaskAck{TaskID: t.id, Operator: t.opName, Kind: "source", Offsets: offsets}); err != nil {
		return nil, err
	}
	if err := broadcast(ctx, t.w, view, t.jobID, t.id, wire.FrameCheckpoint, id); err != nil {
		return nil, err
	}
	return offsets, nil
}

// dispatchCheckpoint serves the checkpoint verbs; ok is false for others.
func (w *Worker) dispatchCheckpoint(ctx context.Context, verb string, env control.Envelope) (body any, ok bool, err error) {
	switch verb {
	case control.VerbCheckpointInject, control.VerbCheckpointAbort, control.VerbCheckpointRestore, control.VerbCheckpointCommit:
	default:
		return nil, false, nil
	}
	req, err := decodeBody[control.CheckpointRequest](env)
	if err != nil {
		return nil, true, err
	}
	if req.CheckpointID == "" {
		return nil, true, fmt.Errorf("%s: checkpoint_id is required", verb)
	}
	switch verb {
	case control.VerbCheckpointCommit:
		return nil, true, w.commitCheckpoint(ctx, env.JobID, req) // checkpoint_commit.go
	case control.VerbCheckpointInject:
		reply := control.CheckpointInjectReply{Offsets: map[int32]int64{}}
		for _, t := range w.jobTasks(env.JobID, req.TaskIDs) {
			if t.source == nil {
				continue
			}
			if !t.started.Load() {
				return nil, true, fmt.Errorf("%s: source %s is not running", verb, t.id)
			}
			var offsets map[int32]int64
			err := t.command(ctx, sourceCmd{kind: "run", fn: func(ctx context.Context, t *task) error {
				var err error
				offsets, err = t.injectCheckpoint(ctx, req.CheckpointID)
				return err
			}})
			if err != nil {
				return nil, true, fmt.Errorf("%s: source %s: %w", verb, t.id, err)
			}
			for p, o := range offsets {
				reply.Offsets[p] = o
			}
		}
		return reply, true, nil
	case control.VerbCheckpointAbort:
		var running []string
		for _, t := range w.jobTasks(env.JobID, req.TaskIDs) {
			if t.started.Load() && t.source == nil {
				running = append(running, t.id)
			}
		}
		if len(running) == 0 {
			return nil, true, nil
		}
		return nil, true, w.onTaskGoroutines(ctx, env.JobID, running, func(ctx context.Context, t *task) error {
			t.ckpt.abort(req.CheckpointID)
			if tp, ok := t.twoPhase(); ok {
				if err := tp.abortCheckpoint(ctx, req.CheckpointID); err != nil {
					t.fail(err)
					return err
				}
			}
			if a := t.ckpt.align; a == nil || a.id != req.CheckpointID {
				return nil
			}
			return t.releaseCheckpointHold(ctx)
		})
	}
	reply, err := w.restoreCheckpoint(ctx, env.JobID, req) // checkpoint_restore.go
	return reply, true, err
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
