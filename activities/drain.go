package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
)

// DrainInput pauses (or finishes) a job's sources behind a barrier and
// waits until every sink has seen it on all its inputs.
type DrainInput struct {
	Deployment control.Deployment `json:"deployment"`
	BarrierID  string             `json:"barrier_id"`
	// EndOffsets, when set, make this the end of the run: sources read up
	// to these offsets, then emit end-of-stream.
	EndOffsets  map[int32]int64 `json:"end_offsets,omitempty"`
	TimeoutSecs float64         `json:"timeout_secs"`
	Step        StepInfo        `json:"step"`
}

// DrainReport says how long the drain took.
type DrainReport struct {
	Millis float64 `json:"millis"`
}

// PauseAndDrain stops the sources behind barrier BarrierID and returns once
// the pipeline holds no in-flight record. A retry re-sends the pause; the
// sources re-emit the barrier, so the wait completes again.
func (a *Activities) PauseAndDrain(ctx context.Context, in DrainInput) (DrainReport, error) {
	return a.drain(ctx, in, control.VerbPause, control.BarrierRequest{BarrierID: in.BarrierID})
}

// FinishAndDrain tells the sources where the input ends and waits for the
// end-of-stream barrier at every sink.
func (a *Activities) FinishAndDrain(ctx context.Context, in DrainInput) (DrainReport, error) {
	return a.drain(ctx, in, control.VerbFinish, control.FinishRequest{BarrierID: in.BarrierID, EndOffsets: in.EndOffsets})
}

func (a *Activities) drain(ctx context.Context, in DrainInput, verb string, body any) (DrainReport, error) {
	var rep DrainReport
	err := a.step(ctx, in.Step, func() error {
		start := time.Now()
		dep := in.Deployment
		_, sinkGroups := tasksByWorker(dep, isSink(dep))
		waiting := map[string]bool{}
		for _, ids := range sinkGroups {
			for _, id := range ids {
				waiting[id] = true
			}
		}
		// Subscribe before triggering so no announcement is missed.
		ch := make(chan *nats.Msg, 64)
		sub, err := a.NC.ChanSubscribe(control.BarrierSubject(dep.Job.JobID), ch)
		if err != nil {
			return fmt.Errorf("subscribe to barriers of job %s: %w", dep.Job.JobID, err)
		}
		defer sub.Unsubscribe()
		if err := a.NC.FlushWithContext(ctx); err != nil {
			return fmt.Errorf("NATS flush: %w", err)
		}
		order, groups := tasksByWorker(dep, isSource(dep))
		for _, wid := range order {
			req := body
			if br, ok := body.(control.BarrierRequest); ok {
				br.TaskIDs = groups[wid]
				req = br
			}
			if err := a.request(ctx, wid, verb, dep.Job.JobID, in.Step.ReconfigID, req, nil); err != nil {
				return err
			}
		}
		timeout := time.Duration(in.TimeoutSecs * float64(time.Second))
		if timeout <= 0 {
			timeout = 5 * time.Minute
		}
		deadline := time.NewTimer(timeout)
		defer deadline.Stop()
		beat := time.NewTicker(time.Second)
		defer beat.Stop()
		for len(waiting) > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-deadline.C:
				return fmt.Errorf("barrier %s of job %s: sinks %s did not see it within %s", in.BarrierID, dep.Job.JobID, keys(waiting), timeout)
			case <-beat.C:
				heartbeat(ctx, keys(waiting))
			case msg := <-ch:
				var ev control.BarrierAligned
				if json.Unmarshal(msg.Data, &ev) == nil && ev.BarrierID == in.BarrierID {
					delete(waiting, ev.TaskID)
				}
			}
		}
		rep.Millis = float64(time.Since(start).Microseconds()) / 1e3
		return nil
	})
	return rep, err
}

func keys(m map[string]bool) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
