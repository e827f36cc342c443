package dataplane

import (
	"context"
	"fmt"
	"sort"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// Handoff acknowledgements close the checkpoint window of a handoff.
//
// From the moment an old owner gives buckets away (handoff) its part no
// longer holds their lookup entries — they are on their way to the new
// owner — and until the new owner installs them (endKLT) the new owner's
// part does not hold them either. A checkpoint whose old owner's part is
// written after the handoff and whose new owner's part before the install
// would lose every key of those buckets. So:
//
//   - the old owner marks each handoff when it starts it and refuses its
//     part while a mark is set;
//   - the new owner, once it installed the entries, acks over the data
//     channel (FrameKLTAck), naming the last checkpoint it wrote its part
//     of before the install;
//   - the ack clears the mark, and the old owner also refuses its part of
//     every checkpoint up to the one named: the new owner's part of it
//     lacks the entries.
//
// The other mix is consistent: a new owner's part written after the
// install names the keys under the old owner, and the old owner's part of
// the same checkpoint, written before the handoff, still holds them.

// kltFromKey names the old owner's address in a KLT end frame.
const kltFromKey = "from"

// handoffAcks is an old owner's record of its handoffs; owned by the task
// goroutine.
type handoffAcks struct {
	unacked map[string]bool // "reconfig/newOwner": sent, not installed yet
	// behind is the latest checkpoint a new owner wrote its part of before
	// installing entries from here, by behindOwner.
	behind, behindOwner string
}

func (h *handoffAcks) sent(reconfigID, to string) {
	if h.unacked == nil {
		h.unacked = map[string]bool{}
	}
	h.unacked[reconfigID+"/"+to] = true
}

// acked records new owner to's install of reconfiguration reconfigID's
// entries, having written its part of checkpoint last ("" none) before.
func (h *handoffAcks) acked(reconfigID, to, last string) {
	delete(h.unacked, reconfigID+"/"+to)
	if last > h.behind {
		h.behind, h.behindOwner = last, to
	}
}

// refusal says why this task's part of checkpoint id must not be
// written, or "".
func (h *handoffAcks) refusal(id string) string {
	if len(h.unacked) > 0 {
		pending := make([]string, 0, len(h.unacked))
		for k := range h.unacked {
			pending = append(pending, k)
		}
		sort.Strings(pending)
		return fmt.Sprintf("lookup table handoff not yet installed by the new owner (%s)", pending[0])
	}
	if id <= h.behind {
		return fmt.Sprintf("new owner %s wrote its part of %s before installing the lookup entries handed to it", h.behindOwner, h.behind)
	}
	return ""
}

// ackKLT tells old owner from that this task installed reconfiguration
// reconfigID's entries. It is sent off the task goroutine: the old owner
// may itself be blocked delivering to this task. A lost ack keeps the old
// owner refusing its parts, never makes a part wrong.
func (t *task) ackKLT(ctx context.Context, from control.TaskRef, reconfigID string) {
	if from.ID == "" {
		return
	}
	f := &wire.Frame{Kind: wire.FrameKLTAck, JobID: t.jobID, FromTask: t.id, ToTask: from.ID, BarrierID: reconfigID,
		Records: []Record{{Key: []byte(t.keyed.lastCheckpoint()), Offset: -1}}}
	go func() {
		if err := t.w.deliver(ctx, from, f); err != nil && ctx.Err() == nil {
			t.w.log.Warn("handoff ack not delivered; the old owner refuses its checkpoint parts", "task", t.id, "to", from.ID, "reconfig", reconfigID, "err", err)
		}
	}()
}

// onKLTAck takes a new owner's ack of a handoff from this task.
func (t *task) onKLTAck(f *wire.Frame) error {
	if len(f.Records) != 1 {
		return fmt.Errorf("task %s: KLT ack from %s with %d records, want 1", t.id, f.FromTask, len(f.Records))
	}
	t.handoffs.acked(f.BarrierID, f.FromTask, string(f.Records[0].Key))
	return nil
}

// handoffSending reports whether records forwarded to a new owner still
// wait behind its lookup entries (a queue not yet flushed).
func (o *outputs) handoffSending() bool {
	for _, q := range o.diverted {
		q.mu.Lock()
		done := q.done
		q.mu.Unlock()
		if !done {
			return true
		}
	}
	return false
}
