package dataplane

import (
	"context"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// outputs batches emitted records per target task during one input batch.
type outputs struct {
	view    *taskView
	from    int
	jobID   string
	taskID  string
	pending map[string]*wire.Frame
	targets map[string]control.TaskRef
	order   []string
	count   int
	// expect is how many records the current input batch may emit (its
	// size), so output frames start with room for them.
	expect int
	// diverted holds the handoff queues of new owners whose lookup entries
	// are still being sent; frames for them wait there.
	diverted map[string]*handoffQueue
	// lastRef and lastFrame are the route task the previous record went to
	// and its pending frame: consecutive records of a batch mostly share a
	// target, and comparing the route's task pointer is cheaper than a map
	// lookup by task id per record. Reset by begin and flush.
	lastRef   *control.TaskRef
	lastFrame *wire.Frame
	// blocked, when set, times flush's sends (the task's taskStats.blocked).
	blocked *waitMeter
}

// divert makes frames for task id wait in q until its handoff is done.
func (o *outputs) divert(id string, q *handoffQueue) {
	if o.diverted == nil {
		o.diverted = map[string]*handoffQueue{}
	}
	o.diverted[id] = q
}

// begin starts an input batch of expect records (0 if unknown).
func (o *outputs) begin(view *taskView, fromIndex int, jobID, taskID string, expect int) {
	o.view, o.from, o.jobID, o.taskID, o.expect = view, fromIndex, jobID, taskID, expect
	if o.pending == nil {
		o.pending = map[string]*wire.Frame{}
		o.targets = map[string]control.TaskRef{}
	}
	o.count = 0
	o.lastRef, o.lastFrame = nil, nil
}

func (o *outputs) emit(r Record) {
	for _, rt := range o.view.routes {
		ref := rt.targetRef(&r, o.from)
		if ref == o.lastRef {
			o.lastFrame.Records = append(o.lastFrame.Records, r)
			o.count++
			continue
		}
		o.lastFrame, o.lastRef = o.emitTo(*ref, r), ref
	}
}

// emitTo adds r to the pending frame for target and returns that frame.
func (o *outputs) emitTo(target control.TaskRef, r Record) *wire.Frame {
	f := o.pending[target.ID]
	if f == nil {
		f = &wire.Frame{Kind: wire.FrameData, JobID: o.jobID, FromTask: o.taskID, ToTask: target.ID}
		// A batch's records mostly go to one target or spread over a few;
		// room for the whole batch avoids growing the array record by record.
		// Receivers release pooled arrays once processed (Frame.release).
		f.ReserveRecords(o.expect)
		o.pending[target.ID] = f
		o.targets[target.ID] = target
		o.order = append(o.order, target.ID)
	}
	f.Records = append(f.Records, r)
	o.count++
	return f
}

// flush sends every pending frame, in first-emitted order, and returns how
// many records went out.
func (o *outputs) flush(ctx context.Context, w *Worker) (int, error) {
	n := o.count
	o.lastRef, o.lastFrame = nil, nil
	for _, id := range o.order {
		f := o.pending[id]
		delete(o.pending, id)
		if err := o.sendTimed(ctx, w, o.targets[id], f); err != nil {
			o.order = o.order[:0]
			return n, err
		}
	}
	o.order = o.order[:0]
	o.count = 0
	return n, nil
}
