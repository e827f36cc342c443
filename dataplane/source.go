package dataplane

import (
	"context"
	"fmt"
	"koala/dataplane/control"
	"koala/dataplane/kafkaio"
	"koala/dataplane/wire"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sourceCmd is a control request executed by the source goroutine itself,
// so barriers are ordered exactly after the records emitted before them.
type sourceCmd struct {
	kind       string // "pause", "resume", "finish"
	barrierID  string
	endOffsets map[int32]int64
	fn         func(ctx context.Context, t *task) error // kind "run"
	reply      chan error
}

// sourceState is the task side of a source: its partition reader, the
// control requests its goroutine executes, whether it is paused, and the
// credit it reads on (source_credit.go).
type sourceState struct {
	*kafkaio.Reader
	cmds   chan sourceCmd
	paused atomic.Bool
	credit *sourceCredit
	// creditView is the view the credit was last pruned for (source
	// goroutine only).
	creditView *taskView
}

func newSourceState(brokers []string, topic string, parts []int32, start map[int32]int64, extra []kgo.Opt, ahead ReadAhead) (*sourceState, error) {
	r, err := kafkaio.NewReader(brokers, topic, parts, start, extra)
	if err != nil {
		return nil, err
	}
	return &sourceState{Reader: r, cmds: make(chan sourceCmd, 8), credit: newSourceCredit(ahead)}, nil
}

// lag is the records of the source's partitions that the pipeline has not
// taken: those not yet read from Kafka and those read but not yet
// processed by the next operator.
func (s *sourceState) lag() uint64 {
	return s.Lag() + uint64(s.credit.records())
}

// command runs a control request on the source goroutine.
func (t *task) command(ctx context.Context, cmd sourceCmd) error {
	cmd.reply = make(chan error, 1)
	select {
	case t.source.cmds <- cmd:
		t.nudgeControl() // it may wait on a hold (route_hold.go)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-cmd.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sourceRun is how far the source goroutine got with finishing its input.
type sourceRun struct {
	finishAt map[int32]int64
	finishID string
	finished bool
}

// runSource polls Kafka and emits batches until cancelled or finished.
func (t *task) runSource(ctx context.Context) error {
	s := t.source
	go t.trackLag(ctx)
	var run sourceRun
	for ctx.Err() == nil {
		// Control requests first; block on them while paused or finished.
		for {
			var cmd sourceCmd
			if s.paused.Load() || run.finished {
				select {
				case <-ctx.Done():
					return nil
				case cmd = <-s.cmds:
				}
			} else {
				select {
				case cmd = <-s.cmds:
				default:
				}
			}
			if cmd.kind == "" {
				break
			}
			t.execSourceCmd(ctx, cmd, &run)
		}
		if run.finishAt != nil && !run.finished && s.Reached(run.finishAt) {
			// End of input: a final watermark fires every pending window (watermark.go).
			if err := t.sourceWatermark(ctx, true); err != nil {
				return err
			}
			if err := broadcast(ctx, t.w, t.view.Load(), t.jobID, t.id, wire.FrameEOS, run.finishID); err != nil {
				return err
			}
			run.finished = true
			continue
		}
		if !s.credit.ready(t.view.Load().job.BatchSize) {
			// The downstream has not processed what was read: wait for its
			// credit, still taking control requests (barriers need none).
			// The wait is the source's backpressure.
			t.stats.blocked.begin(time.Now())
			select {
			case <-ctx.Done():
				t.stats.blocked.end(time.Now())
				return nil
			case <-s.credit.wake:
				t.stats.blocked.end(time.Now())
			case cmd := <-s.cmds:
				t.stats.blocked.end(time.Now())
				t.execSourceCmd(ctx, cmd, &run)
			}
			continue
		}
		if err := t.pollOnce(ctx, run.finishAt); err != nil {
			return err
		}
		if err := t.sourceWatermark(ctx, false); err != nil { // watermark.go
			return err
		}
	}
	return nil
}

// execSourceCmd runs one control request on the source goroutine.
func (t *task) execSourceCmd(ctx context.Context, cmd sourceCmd, run *sourceRun) {
	s := t.source
	view := t.view.Load()
	switch cmd.kind {
	case "pause":
		s.paused.Store(true)
		cmd.reply <- broadcast(ctx, t.w, view, t.jobID, t.id, wire.FrameBarrier, cmd.barrierID)
	case "resume":
		s.paused.Store(false)
		cmd.reply <- nil
	case "finish":
		// A repeated finish (retried activity) re-emits end-of-stream.
		run.finishAt, run.finishID, run.finished = cmd.endOffsets, cmd.barrierID, false
		cmd.reply <- nil
	case "run":
		cmd.reply <- cmd.fn(ctx, t)
	default:
		cmd.reply <- fmt.Errorf("source %s: unknown command %q", t.id, cmd.kind)
	}
}

// pollOnce reads up to one batch and emits it. Records past a finish
// offset are never emitted (they belong to no run).
func (t *task) pollOnce(ctx context.Context, finishAt map[int32]int64) error {
	s := t.source
	if view := t.view.Load(); view != s.creditView {
		s.credit.prune(view.dep)
		s.creditView = view
	}
	// Never read more than the credit left: records polled are handed on.
	room := s.credit.room()
	if room <= 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	// Poll returns buffered records at once and blocks only while Kafka
	// has none for it: the source's wait for input (its idle ratio).
	t.stats.idle.begin(time.Now())
	fetches := s.Poll(pctx, min(max(1, t.view.Load().job.BatchSize), room))
	t.stats.idle.end(time.Now())
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	var firstErr error
	fetches.EachError(func(topic string, p int32, err error) {
		if pctx.Err() == nil && firstErr == nil && err != context.DeadlineExceeded && err != context.Canceled {
			firstErr = fmt.Errorf("kafka fetch %s[%d]: %w", topic, p, err)
		}
	})
	if firstErr != nil {
		t.w.log.Warn("source fetch error; retrying", "task", t.id, "err", firstErr)
	}
	start := time.Now()
	view := t.view.Load()
	t.out.begin(view, t.index, t.jobID, t.id, fetches.NumRecords())
	n, rejected := 0, 0
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		next := int64(-1) // position after the last record taken
		for _, r := range fp.Records {
			if finishAt != nil {
				if end, ok := finishAt[r.Partition]; ok && r.Offset >= end {
					continue
				}
			}
			rec := Record{Key: r.Key, Value: r.Value, EventTime: r.Timestamp.UnixNano(), Partition: r.Partition, Offset: r.Offset}
			if t.dead.TooLarge(rec) {
				t.dead.Reject(rec, kafkaio.ReasonOversize, fmt.Errorf("%d bytes of key and value exceed %s %d", len(r.Key)+len(r.Value), control.ParamMaxRecordBytes, t.dead.MaxRecordBytes()))
				rejected++
			} else {
				t.out.emit(rec)
				t.wm.observe(r.Partition, r.Timestamp.UnixNano()) // watermark.go
				n++
			}
			next = r.Offset + 1
		}
		// Positions move once per partition and fetch, not per record; the
		// batch leaves the task only after this loop (flush).
		s.Advance(fp.Partition, fp.HighWatermark, next)
	})
	if n > 0 {
		// Numbered and counted before delivery: from here on they are lag
		// until their receivers acknowledge them.
		s.credit.record(&t.out)
	}
	t.stats.kafkaLag.Store(s.lag())
	if rejected > 0 {
		t.dead.Flush(ctx) // before the records after them and any barrier
	}
	if n == 0 {
		return nil
	}
	t.stats.recordsIn.Add(uint64(n))
	sent, err := t.out.flush(ctx, t.w)
	t.stats.recordsOut.Add(uint64(sent))
	t.stats.observeBatch(time.Since(start))
	return err
}

// trackLag refreshes the end offsets of the task's partitions every
// endOffsetRefresh, from the start and independently of polling, so the lag
// metric keeps growing while the source is paused or waits for credit (a
// fetch only reports the end it reached) and falls as the downstream
// acknowledges what it processed, and so a partition's idleness is judged
// by a fresh end offset (idleness.go).
func (t *task) trackLag(ctx context.Context) {
	s := t.source
	tick := time.NewTicker(endOffsetRefresh)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*endOffsetRefresh)
		// On error the next tick retries; the lag keeps the last end offsets
		// but still follows what the downstream acknowledged, and their
		// age holds the partitions non-idle once they are stale.
		_ = s.RefreshEnds(rctx)
		cancel()
		t.stats.kafkaLag.Store(s.lag())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
