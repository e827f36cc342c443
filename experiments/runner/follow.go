package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"koala/workflows"
)

// ErrGaveUp marks a run that Follow stopped waiting for: the caller owns the
// workflow and should terminate it so it does not disturb the next run.
var ErrGaveUp = errors.New("run exceeded its time limit")

// Follow waits for the workflow, printing "label phase elapsed / total" every
// 5 s. With a limit above zero it gives up after it (ErrGaveUp); the
// workflow itself goes on.
func Follow(ctx context.Context, run client.WorkflowRun, label string, total int, limit time.Duration) (workflows.ExperimentResult, error) {
	var res workflows.ExperimentResult
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run.Get(gctx, &res) }()
	start := time.Now()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	expired, stopDeadline := deadline(limit)
	defer stopDeadline()
	prefix := ""
	if label != "" {
		prefix = label + " "
	}
	for {
		select {
		case err := <-done:
			return res, err
		case <-expired:
			return res, fmt.Errorf("%w (%s)", ErrGaveUp, limit)
		case <-tick.C:
			el := time.Since(start).Seconds()
			phase := "running"
			if el > float64(total) {
				phase = "draining"
			}
			fmt.Printf("  %s%s %3.0fs / %ds\n", prefix, phase, el, total)
		}
	}
}

// StopWait is how long Stop waits for a canceled run to close before it
// terminates it.
const StopWait = 30 * time.Second

// Stop ends a run this process started and gave up on or was interrupted
// in, with its own deadline (the caller's context may be done): a cancel
// first, so the run's cleanup stops its tasks and producers — a
// terminated run runs no code, and its job kept processing beside the
// next run — then a terminate if it has not closed within StopWait.
func Stop(tc client.Client, run client.WorkflowRun, reason string) error {
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := tc.CancelWorkflow(cctx, run.GetID(), run.GetRunID())
	cancel()
	if err == nil {
		wctx, wcancel := context.WithTimeout(context.Background(), StopWait)
		werr := run.Get(wctx, nil)
		closed := wctx.Err() == nil
		wcancel()
		if closed {
			fmt.Printf("  stopped %s (%s): canceled, its tasks and producers stopped (%v)\n", run.GetID(), reason, werr)
			return nil
		}
	}
	tctx, tcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer tcancel()
	if terr := tc.TerminateWorkflow(tctx, run.GetID(), run.GetRunID(), reason); terr != nil {
		return errors.Join(err, terr)
	}
	fmt.Printf("  terminated %s (%s): it did not close within %s of a cancel; its job may still run on the workers\n", run.GetID(), reason, StopWait)
	return nil
}

// stopping says whether a Follow error leaves the run for the caller to
// Stop: it gave up, or the caller was interrupted.
func stopping(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(err, ErrGaveUp) || ctx.Err() != nil)
}

// Stopping is stopping for the bench's runs.
func Stopping(ctx context.Context, err error) bool { return stopping(ctx, err) }

// UILink is the Temporal web UI page of a workflow run's history.
func UILink(uiURL, namespace, workflowID, runID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s/history", strings.TrimRight(uiURL, "/"), namespace, workflowID, runID)
}

// WriteRawResult keeps a workflow result as dir/result-name.json, for digging
// into one run later. Best effort: a run's summary stands without it.
func WriteRawResult(dir, name string, res workflows.ExperimentResult) {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, "result-"+name+".json"), append(data, '\n'), 0o644)
}

// Sleep pauses for d or until ctx is done, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// DefaultBrokers fills in brokers for an experiment whose config names none.
func DefaultBrokers(in *workflows.ExperimentInput, brokers []string) {
	if len(in.KafkaBrokers) == 0 {
		in.KafkaBrokers = brokers
	}
}

// deadline fires once after limit; with limit ≤ 0 it never fires. Call
// stop when done with it.
func deadline(limit time.Duration) (expired <-chan time.Time, stop func()) {
	if limit <= 0 {
		return nil, func() {}
	}
	t := time.NewTimer(limit)
	return t.C, func() { t.Stop() }
}
