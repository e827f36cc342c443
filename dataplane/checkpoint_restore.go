package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"koala/dataplane/checkpoint"
	"koala/dataplane/control"
	"os"
	"path/filepath"
)

// Restoring a checkpoint into freshly deployed tasks, and the sink's part.
//
// Exactly-once output. The sinks of koala's jobs record their output in a
// ledger (which source records arrived, duplicates counted) and, for the
// collecting sink, per-key values. That output is part of the sink task's
// checkpointed state: it is saved at the barrier and restored with the
// rest of the job, so the records replayed after a recovery replace the
// output of the records after the cut instead of adding to it — the sink
// behaves like a transactional sink that commits at every checkpoint and
// aborts its open transaction on failure. Output visible outside the job
// is not rolled back: the Kafka sink commits it with checkpoints instead
// (kafkaio/txn.go), so read_committed consumers see it exactly once.

// sinkState is a sink's part of a checkpoint.
type sinkState struct {
	// Seen is the ledger's bitset of each partition, little-endian words
	// (base64 in JSON: 1.33 bytes per 8 offsets).
	Seen       map[int32][]byte  `json:"seen"`
	Received   uint64            `json:"received"`
	Distinct   uint64            `json:"distinct"`
	Duplicates uint64            `json:"duplicates"`
	Values     map[string]uint64 `json:"values,omitempty"`
}

// saveSinkState writes the sink's ledger and values into dir and returns
// the bytes written.
func (t *task) saveSinkState(dir string) (uint64, error) {
	l := t.ledger
	l.mu.Lock()
	st := sinkState{Seen: make(map[int32][]byte, len(l.seen)), Received: l.received, Distinct: l.distinct, Duplicates: l.duplicates}
	for p, bits := range l.seen {
		buf := make([]byte, 0, 8*len(bits))
		for _, w := range bits {
			buf = binary.LittleEndian.AppendUint64(buf, w)
		}
		st.Seen[p] = buf
	}
	l.mu.Unlock()
	if t.values != nil {
		st.Values = t.values.snapshot()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("sink state: %w", err)
	}
	path := filepath.Join(dir, checkpoint.SinkFile)
	if err := checkpoint.WriteJSONAtomic(path, st); err != nil {
		return 0, fmt.Errorf("sink state: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("sink state: %w", err)
	}
	return uint64(info.Size()), nil
}

// loadSinkState replaces the sink's ledger and values with those in dir.
func (t *task) loadSinkState(dir string) error {
	var st sinkState
	ok, err := checkpoint.ReadJSON(filepath.Join(dir, checkpoint.SinkFile), &st)
	if err != nil {
		return fmt.Errorf("sink state: %w", err)
	}
	if !ok {
		return fmt.Errorf("sink state: %s has no %s (the part is not a sink's)", dir, checkpoint.SinkFile)
	}
	seen := make(map[int32][]uint64, len(st.Seen))
	for p, buf := range st.Seen {
		if len(buf)%8 != 0 {
			return fmt.Errorf("sink state: partition %d's ledger has %d bytes, not a multiple of 8", p, len(buf))
		}
		bits := make([]uint64, len(buf)/8)
		for i := range bits {
			bits[i] = binary.LittleEndian.Uint64(buf[8*i:])
		}
		seen[p] = bits
	}
	l := t.ledger
	l.mu.Lock()
	l.seen, l.received, l.distinct, l.duplicates = seen, st.Received, st.Distinct, st.Duplicates
	l.restartOrder()
	l.mu.Unlock()
	if t.values != nil {
		t.values.replace(st.Values)
	}
	return nil
}

// restoreCheckpoint loads the parts of checkpoint req.CheckpointID into the
// named tasks, which must be deployed and not started.
func (w *Worker) restoreCheckpoint(ctx context.Context, jobID string, req control.CheckpointRequest) (control.CheckpointRestoreReply, error) {
	var reply control.CheckpointRestoreReply
	if len(req.TaskIDs) == 0 {
		return reply, fmt.Errorf("%s: task_ids are required", control.VerbCheckpointRestore)
	}
	tasks := w.jobTasks(jobID, req.TaskIDs)
	if len(tasks) != len(req.TaskIDs) {
		return reply, fmt.Errorf("%s: worker %s has %d of the tasks %v of job %q", control.VerbCheckpointRestore, w.opts.ID, len(tasks), req.TaskIDs, jobID)
	}
	for _, t := range tasks {
		if t.started.Load() {
			return reply, fmt.Errorf("%s: task %s is already running; a checkpoint is loaded before a task starts", control.VerbCheckpointRestore, t.id)
		}
		from := t.id
		if f := req.From[t.id]; f != "" {
			from = f
		}
		store, err := checkpoint.Open(t.view.Load().job.Params[control.ParamCheckpointStore])
		if err != nil {
			return reply, err
		}
		dir, err := store.FetchTask(ctx, jobID, req.CheckpointID, from)
		if err != nil {
			return reply, err
		}
		ack, _, err := store.TaskAck(ctx, jobID, req.CheckpointID, from)
		if err != nil {
			return reply, err
		}
		if ack.Error != "" {
			return reply, fmt.Errorf("%s: checkpoint %s: task %s's part failed when taken: %s", control.VerbCheckpointRestore, req.CheckpointID, from, ack.Error)
		}
		if ack.Operator != t.opName {
			return reply, fmt.Errorf("%s: checkpoint %s: part %s is of operator %q, task %s is of %q", control.VerbCheckpointRestore, req.CheckpointID, from, ack.Operator, t.id, t.opName)
		}
		if t.keyed != nil {
			if _, err := t.loadSnapshot(dir); err != nil {
				return reply, fmt.Errorf("%s: task %s: %w", control.VerbCheckpointRestore, t.id, err)
			}
			// Keys the part lists as still on old owners come from those
			// owners' parts now (the rule in checkpoint_barrier.go).
			copied, err := t.resolveRemoteKeys(ctx, store, req.CheckpointID)
			if err != nil {
				return reply, fmt.Errorf("%s: task %s: %w", control.VerbCheckpointRestore, t.id, err)
			}
			if copied > 0 {
				w.log.Info("restored keys still remote at the checkpoint", "task", t.id, "checkpoint", req.CheckpointID, "keys", copied)
			}
			t.keyed.setLastCheckpoint(req.CheckpointID)
		}
		if t.ledger != nil {
			if err := t.loadSinkState(dir); err != nil {
				return reply, fmt.Errorf("%s: task %s: %w", control.VerbCheckpointRestore, t.id, err)
			}
		}
		if tp, ok := t.twoPhase(); ok {
			// Not started yet: nothing else uses the operator.
			if err := tp.restoreCheckpoint(ctx, dir); err != nil {
				return reply, fmt.Errorf("%s: task %s: %w", control.VerbCheckpointRestore, t.id, err)
			}
		}
		ack.TaskID = t.id
		reply.Tasks = append(reply.Tasks, ack)
	}
	return reply, nil
}
