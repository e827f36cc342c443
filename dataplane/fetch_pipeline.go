package dataplane

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"koala/dataplane/wire"
)

// The fetch pipeline lets a task go on with its next batches while the
// on-demand fetches of earlier ones are out. Before it, a batch with keys
// still on their old owner ended only when their fetch had, so after a scale-out the new owner ran one fetch round trip per batch,
// to an old owner whose worker was busy with its own records: its task
// goroutine was on CPU a quarter to a third of the time, and the sink
// stayed near the pre-scale rate for tens of seconds (EXPERIMENTS.md,
// taxi's swap-routes).
//
// A batch's records of remote keys now form a segment that waits for its
// own fetch; its records of local keys are processed at once. Up to
// fetchDepth segments are out together. A key is in at most one segment,
// and while it is, or while records of it wait in the tail, its later
// records join the tail in arrival order instead of overtaking: every
// key's records are processed in order, and only records of different
// keys change places, which per-key order allows. The tail runs again
// once a segment ends.
//
// Whatever needs every record before it processed — barriers, checkpoints,
// route and key-table frames, control items, a bulk handoff — first drains
// the pipeline (drainFetches). A watermark, which comes every
// WatermarkInterval and would drain it all the time, waits instead until
// the records that came before it are processed, unless the operator acts
// on watermarks (then it drains too); records that came after it may be
// processed first, as they may pass one another anywhere else. A batch
// whose records carry a late bound, and bulk handoffs (stop-and-restart,
// DRRS), do not use the pipeline: such a batch processes its local keys'
// records, then waits for its own fetch before it ends.
// A source's credit returns when the batch is dispatched, so the held
// records (at most the inbox's record bound) are read ahead of their
// processing, like the inbox's.

// fetchDepth is the most fetches out at once, and fetchHeldInboxes how
// many inboxes' worth of records (control.TaskInboxMaxRecords) the
// segments and tail may hold. Right after a scale-out's swap nearly every
// key of the new owner is remote, so each batch becomes a segment. With 4
// out and one inbox held, the new owner took no frame while its fetches
// were out, its inbox filled, the source feeding both owners waited for
// room in it, and the old owner sat idle for want of input: q6*'s sink
// fell to 0.32-0.82 of its pre-scale rate in that second (6 runs at a
// fixed rate, mean 0.63). With 32 and four inboxes, 0.50-1.11 (8 runs,
// mean 0.74; EXPERIMENTS.md, "The fetch pipeline's depth"). The records
// held stay bounded (about a third of a second of a task's input at that
// rate), and the old owner's gRPC server serves the fetches concurrently.
const (
	fetchDepth       = 32
	fetchHeldInboxes = 4
)

// fetchResult is what fetchKeys returned, from its goroutine.
type fetchResult struct {
	fetched map[string][]byte
	taken   map[string][][]byte
	err     error
}

// fetchSeg is one segment: the records of the keys of one fetch.
type fetchSeg struct {
	seq    uint64   // the number of its oldest record's batch
	recs   []Record // in arrival order
	keys   [][]byte // distinct, as added to st
	st     *State
	remote map[string][][]byte // keys by owner, as fetchKeys takes them
	done   chan fetchResult    // buffered: the fetch never waits for the task
	cancel context.CancelFunc
}

// fetchPipe is a task's segments and tail (task goroutine only, but for
// ready).
type fetchPipe struct {
	segs []*fetchSeg // oldest first
	tail []Record
	// seq numbers the data batches; tailSeq is the number of each tail
	// record's batch.
	seq     uint64
	tailSeq []uint64
	// frames wait for the records of the batches before them.
	frames []deferredFrame
	// busy counts, per key, the segments holding it plus its records in
	// the tail: a batch's record of a busy key joins the tail.
	busy map[string]int
	held int // records in segs and tail
	// maxHeld bounds held: past it the task waits for fetches before it
	// takes more (control.TaskInboxMaxRecords).
	maxHeld int
	free    []Record      // hold's result, reused
	ready   chan struct{} // a fetch returned (buffered 1)
}

// deferredFrame is a frame that waits for the held records of the
// batches up to after.
type deferredFrame struct {
	f     *wire.Frame
	view  *taskView
	after uint64
}

func (p *fetchPipe) active() bool { return p.held > 0 }

// oldest is the number of the oldest batch with a record held (none:
// the largest number).
func (p *fetchPipe) oldest() uint64 {
	n := uint64(math.MaxUint64)
	if len(p.tailSeq) > 0 {
		n = p.tailSeq[0]
	}
	for _, seg := range p.segs {
		n = min(n, seg.seq)
	}
	return n
}

// hold moves the records of busy keys among recs (of batch seq, or with
// seqs their batches' numbers) to the tail and returns the others, in
// order (in a buffer reused by the next call), and the number of the
// oldest batch among them.
func (p *fetchPipe) hold(recs []Record, seq uint64, seqs []uint64) ([]Record, uint64) {
	free := p.free[:cap(p.free)]
	clear(free) // drop the last call's records
	free = free[:0]
	first := uint64(math.MaxUint64)
	for i, r := range recs {
		if seqs != nil {
			seq = seqs[i]
		}
		if p.busy[string(r.Key)] > 0 {
			p.toTail(r, seq)
			continue
		}
		free = append(free, r)
		first = min(first, seq)
	}
	p.free = free
	return free, first
}

func (p *fetchPipe) toTail(r Record, seq uint64) {
	p.tail = append(p.tail, r)
	p.tailSeq = append(p.tailSeq, seq)
	p.busy[string(r.Key)]++
	p.held++
}

// takeTail empties the tail and returns its records and their batches'
// numbers.
func (p *fetchPipe) takeTail() ([]Record, []uint64) {
	tail, seqs := p.tail, p.tailSeq
	p.tail, p.tailSeq = nil, nil
	for _, r := range tail {
		p.unbusy(r.Key)
	}
	p.held -= len(tail)
	return tail, seqs
}

func (p *fetchPipe) unbusy(key []byte) {
	if n := p.busy[string(key)]; n > 1 {
		p.busy[string(key)] = n - 1
	} else {
		delete(p.busy, string(key))
	}
}

func (p *fetchPipe) add(seg *fetchSeg) {
	if p.busy == nil {
		p.busy = map[string]int{}
	}
	for _, k := range seg.keys {
		p.busy[string(k)]++
	}
	p.held += len(seg.recs)
	p.segs = append(p.segs, seg)
}

// remove takes segment i out of the pipe.
func (p *fetchPipe) remove(i int) {
	seg := p.segs[i]
	p.segs = slices.Delete(p.segs, i, i+1)
	for _, k := range seg.keys {
		p.unbusy(k)
	}
	p.held -= len(seg.recs)
}

// abandon ends the fetches still out and waits for their goroutines, so
// that none reads the store after it closes. Their records are dropped
// with the stopping task, as those of its inbox are (recovery replays
// them from the last checkpoint).
func (p *fetchPipe) abandon() {
	for _, seg := range p.segs {
		seg.cancel()
		<-seg.done
	}
	p.segs, p.tail, p.tailSeq, p.busy, p.held, p.frames = nil, nil, nil, nil, 0, nil
}

// asyncFetch says whether this batch's remote keys may wait in the
// pipeline. Bulk handoffs copy keys on the task goroutine with no claims
// (a fetch out meanwhile could read a value they are writing), and a
// batch's late bound holds only while the batch runs.
func (ks *keyedState) asyncFetch() bool { return !ks.bulk && !ks.syncFetch }

// fetchReady is the channel that wakes an idle task when a fetch returns
// (nil: none can).
func (t *task) fetchReady() <-chan struct{} {
	if t.keyed == nil || !t.keyed.pipe.active() {
		return nil
	}
	return t.keyed.pipe.ready
}

// processAsync processes recs' local keys' records now and makes the
// others a segment whose fetch starts at once (recs, st, refs and remote
// as runKeyed found them: refs, one per key of st, 0 for a local key;
// remote, the others by owner; seq the number of recs' oldest batch).
func (t *task) processAsync(ctx context.Context, recs []Record, st *State, refs []uint32, remote map[string][][]byte, seq uint64) error {
	ks := t.keyed
	p := &ks.pipe
	for len(p.segs) >= fetchDepth {
		if _, err := t.completeFetches(ctx, true); err != nil {
			return err
		}
	}
	seg := &fetchSeg{seq: seq, remote: remote, done: make(chan fetchResult, 1)}
	for ki, k := range st.keys {
		if refs[ki] != 0 {
			seg.keys = append(seg.keys, k)
		}
	}
	seg.st = newState(ks.names, len(seg.keys))
	for _, k := range seg.keys {
		seg.st.addKey(k)
	}
	localRecs := ks.localRecs[:0]
	defer func() { // reused: keep the array, not this batch's records
		clear(localRecs)
		ks.localRecs = localRecs[:0]
	}()
	for i := range recs {
		if refs[st.index[string(recs[i].Key)]] != 0 {
			seg.recs = append(seg.recs, recs[i])
			continue
		}
		localRecs = append(localRecs, recs[i])
	}
	fctx, cancel := context.WithCancel(ctx)
	seg.cancel = cancel
	if p.ready == nil {
		p.ready = make(chan struct{}, 1)
	}
	ready := p.ready
	go func() {
		fetched, taken, err := t.fetchKeys(fctx, remote)
		seg.done <- fetchResult{fetched: fetched, taken: taken, err: err}
		select {
		case ready <- struct{}{}:
		default:
		}
	}()
	p.add(seg)

	if len(localRecs) == 0 {
		return nil
	}
	// st's remote slots stay unread and unwritten: only local keys'
	// records use it.
	getStart := time.Now()
	if err := ks.loadLocal(st, ks.local); err != nil {
		return err
	}
	ks.getNanos.Add(uint64(time.Since(getStart).Nanoseconds()))
	if err := ks.op.ProcessKeyed(localRecs, st, t.out.emit); err != nil {
		return fmt.Errorf("operator %s: %w", t.opName, err)
	}
	return t.writeState(st)
}

// completeFetches processes the segments whose fetch has returned, in
// any order (their keys differ); with wait it first waits for the
// oldest. It returns how many it processed.
func (t *task) completeFetches(ctx context.Context, wait bool) (int, error) {
	p := &t.keyed.pipe
	n := 0
	for i := 0; i < len(p.segs); {
		seg := p.segs[i]
		var res fetchResult
		if wait && n == 0 && i == 0 {
			select {
			case res = <-seg.done:
			case <-ctx.Done():
				return n, ctx.Err()
			}
		} else {
			select {
			case res = <-seg.done:
			default:
				i++
				continue
			}
		}
		p.remove(i)
		n++
		if err := t.finishSeg(seg, res); err != nil {
			return n, err
		}
	}
	return n, nil
}

// finishSeg processes a segment's records with its fetched values.
func (t *task) finishSeg(seg *fetchSeg, res fetchResult) error {
	seg.cancel()
	if res.err != nil {
		return res.err
	}
	ks := t.keyed
	for slot, v := range res.fetched {
		seg.st.setFetched(slot, v)
	}
	if err := ks.op.ProcessKeyed(seg.recs, seg.st, t.out.emit); err != nil {
		return fmt.Errorf("operator %s: %w", t.opName, err)
	}
	if err := t.writeState(seg.st); err != nil {
		return err
	}
	ks.forgetTaken(seg.remote, res.taken)
	return nil
}

// settleFetches processes the segments whose fetch returned (with wait:
// at least the oldest), then the tail's records whose keys are no longer
// in a segment.
func (t *task) settleFetches(ctx context.Context, wait bool) error {
	n, err := t.completeFetches(ctx, wait)
	if err != nil || n == 0 || len(t.keyed.pipe.tail) == 0 {
		return err
	}
	return t.rerunTail(ctx)
}

// rerunTail runs the tail's records again as a batch: those of keys
// still in a segment go back to the tail, in order.
func (t *task) rerunTail(ctx context.Context) error {
	p := &t.keyed.pipe
	tail, seqs := p.takeTail()
	free, first := p.hold(tail, 0, seqs)
	if len(free) == 0 {
		return nil
	}
	return t.runKeyed(ctx, free, true, first)
}

// stepFetches moves the pipeline on by at least one segment or the tail.
func (t *task) stepFetches(ctx context.Context) error {
	if len(t.keyed.pipe.segs) == 0 {
		return t.rerunTail(ctx)
	}
	return t.settleFetches(ctx, true)
}

// drainFetches waits until every held record is processed.
func (t *task) drainFetches(ctx context.Context) error {
	for t.keyed.pipe.active() {
		if err := t.stepFetches(ctx); err != nil {
			return err
		}
	}
	return nil
}

// deferFrame makes non-data frame f wait in the pipeline when it may: a
// watermark for an operator that does not act on watermarks. It reports
// whether it did.
func (t *task) deferFrame(view *taskView, f *wire.Frame) bool {
	if f.Kind != wire.FrameWatermark {
		return false
	}
	if _, acts := t.op.(WatermarkOperator); acts {
		return false
	}
	p := &t.keyed.pipe
	p.frames = append(p.frames, deferredFrame{f: f, view: view, after: p.seq})
	return true
}

// releaseFrames handles the deferred frames whose batches' records are
// all processed, in order. The task's output must have been flushed:
// a released watermark goes out at once.
func (t *task) releaseFrames(ctx context.Context) error {
	p := &t.keyed.pipe
	for len(p.frames) > 0 && p.oldest() > p.frames[0].after {
		d := p.frames[0]
		p.frames[0] = deferredFrame{}
		p.frames = p.frames[1:]
		if err := t.dispatchFrame(ctx, d.view, d.f); err != nil {
			return err
		}
	}
	return nil
}

// outsideBatch runs fn, which may process held records, outside a data
// batch: their output and rejects leave before the frame that called for
// it, and the work counts as a batch.
func (t *task) outsideBatch(ctx context.Context, fn func(context.Context) error) error {
	start := time.Now()
	view := t.view.Load()
	if err := t.orderPending(ctx, view); err != nil {
		return err
	}
	t.out.begin(view, t.index, t.jobID, t.id, 0)
	if err := fn(ctx); err != nil {
		return err
	}
	t.dead.Flush(ctx)
	n, err := t.out.flush(ctx, t.w)
	t.stats.recordsOut.Add(uint64(n))
	t.stats.observeBatch(time.Since(start))
	return err
}
