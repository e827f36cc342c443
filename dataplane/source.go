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
// control requests its goroutine executes and whether it is paused.
type sourceState struct {
	*kafkaio.Reader
	cmds   chan sourceCmd
	paused atomic.Bool
}

func newSourceState(brokers []string, topic string, parts []int32, start map[int32]int64, extra []kgo.Opt) (*sourceState, error) {
	r, err := kafkaio.NewReader(brokers, topic, parts, start, extra)
	if err != nil {
		return nil, err
	}
	return &sourceState{Reader: r, cmds: make(chan sourceCmd, 8)}, nil
}

// command runs a control request on the source goroutine.
func (t *task) command(ctx context.Context, cmd sourceCmd) error {
	cmd.reply = make(chan error, 1)
	select {
	case t.source.cmds <- cmd:
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

// runSource polls Kafka and emits batches until cancelled or finished.
func (t *task) runSource(ctx context.Context) error {
	s := t.source
	go t.trackLag(ctx)
	var finishAt map[int32]int64
	var finishID string
	finished := false
	for ctx.Err() == nil {
		// Control requests first; block on them while paused or finished.
		for {
			var cmd sourceCmd
			if s.paused.Load() || finished {
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
				finishAt, finishID, finished = cmd.endOffsets, cmd.barrierID, false
				cmd.reply <- nil
			case "run":
				cmd.reply <- cmd.fn(ctx, t)
			default:
				cmd.reply <- fmt.Errorf("source %s: unknown command %q", t.id, cmd.kind)
			}
		}
		if finishAt != nil && !finished && s.Reached(finishAt) {
			// End of input: a final watermark fires every pending window (watermark.go).
			if err := t.sourceWatermark(ctx, true); err != nil {
				return err
			}
			if err := broadcast(ctx, t.w, t.view.Load(), t.jobID, t.id, wire.FrameEOS, finishID); err != nil {
				return err
			}
			finished = true
			continue
		}
		if err := t.pollOnce(ctx, finishAt); err != nil {
			return err
		}
		if err := t.sourceWatermark(ctx, false); err != nil { // watermark.go
			return err
		}
	}
	return nil
}

// pollOnce reads up to one batch and emits it. Records past a finish
// offset are never emitted (they belong to no run).
func (t *task) pollOnce(ctx context.Context, finishAt map[int32]int64) error {
	s := t.source
	pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	fetches := s.Poll(pctx, max(1, t.view.Load().job.BatchSize))
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
	t.stats.kafkaLag.Store(s.Lag())
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

// trackLag refreshes the end offsets of the task's partitions once a second,
// independently of polling, so the lag metric keeps growing while the source
// is paused or falling behind (a fetch only reports the end it reached).
func (t *task) trackLag(ctx context.Context) {
	s := t.source
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.RefreshEnds(rctx)
		cancel()
		if err != nil {
			continue // the next tick retries; the metric keeps its last value
		}
		t.stats.kafkaLag.Store(s.Lag())
	}
}
