package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"koala/activities"
	"koala/dataplane/control"
	"koala/experiments"
	"koala/experiments/runner"
	"koala/workflows"
)

// Large-state rows: building gigabytes of state by replaying input inside
// the measured run would take most of the bench, and the window would
// start on a state still growing. So each row first runs its warm-up
// config (IsWarmUp: e.g. one closed auction per new seller, as fast as
// the pipeline takes them) which snapshots its stateful tasks (Pebble
// checkpoints, hard links) into a directory of this run; the measured run
// loads that snapshot before its tasks start (LoadWarmUpData, hard links
// again) and its window opens on the whole state. The snapshot is removed
// after the row.

// WarmUpRun is the run that built a large-state row's state.
type WarmUpRun struct {
	Config     string  `json:"config"`
	WorkflowID string  `json:"workflow_id,omitempty"`
	Snapshot   string  `json:"snapshot,omitempty"` // removed after the row
	Events     int64   `json:"events"`             // records the warm-up produced
	Seconds    float64 `json:"seconds"`            // start of the workflow to its snapshot
	Keys       uint64  `json:"keys"`               // from the snapshot's manifest
	Bytes      uint64  `json:"bytes"`              // its checkpoint files
	Error      string  `json:"error,omitempty"`
}

// benchLargeState runs each row: its warm-up, then the measured run.
func benchLargeState(ctx context.Context, e steadyEnv, rows []Row) []Steady {
	var out []Steady
	for i, row := range rows {
		if ctx.Err() != nil {
			break
		}
		if i > 0 {
			runner.Sleep(ctx, e.o.Gap)
		}
		out = append(out, benchLargeRow(ctx, e, row))
	}
	return out
}

// benchLargeRow builds the row's state, measures the row on it, and
// removes the snapshot.
func benchLargeRow(ctx context.Context, e steadyEnv, row Row) Steady {
	fail := func(w *WarmUpRun, err error) Steady {
		s := Steady{Row: row.Name, Phase: row.Phase, Operator: row.Operator, Unit: row.Unit, Target: row.PerCore, SustainedTarget: row.Sustained,
			MinStateBytes: row.MinStateBytes, Status: experiments.StatusFailed, Reason: "warm-up: " + err.Error(), WarmUp: w}
		fmt.Printf("[%s %s] %s\n", row.Phase, row.Name, s.Reason)
		return s
	}
	w := &WarmUpRun{Config: row.WarmUp}
	warm, err := experiments.LoadConfig(row.WarmUp)
	if err != nil {
		return fail(w, err)
	}
	measured, err := experiments.LoadConfig(row.Config)
	if err != nil {
		return fail(w, err)
	}
	if err := checkWarmUpFits(warm, measured, row.Operator); err != nil {
		return fail(w, fmt.Errorf("%s does not build the state %s loads: %w", row.WarmUp, row.Config, err))
	}
	// Beside the stack's run directory, absolute: the workers write it.
	dir, err := filepath.Abs(filepath.Join(filepath.Dir(e.o.RunDir), "bench-snapshots", e.stamp+"-"+row.Name))
	if err != nil {
		return fail(w, err)
	}
	w.Snapshot = dir
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Printf("[%s %s] removing snapshot %s: %v\n", row.Phase, row.Name, dir, err)
		}
	}()
	if err := runWarmUp(ctx, e, warm, dir, w); err != nil {
		return fail(w, err)
	}
	fmt.Printf("[%s %s] warm-up built %d keys, %s of checkpoint in %.0f s (%s)\n", row.Phase, row.Name, w.Keys, experiments.BytesText(float64(w.Bytes)), w.Seconds, w.WorkflowID)
	runner.Sleep(ctx, e.o.Gap)
	if ctx.Err() != nil {
		return fail(w, ctx.Err())
	}
	s := benchSteady(ctx, e, row, dir)
	s.WarmUp = w
	return s
}

// runWarmUp runs the warm-up config with its snapshot going to dir and
// fills in w.
func runWarmUp(ctx context.Context, e steadyEnv, in workflows.ExperimentInput, dir string, w *WarmUpRun) error {
	runner.DefaultBrokers(&in, e.o.Kafka)
	in.Params[control.ParamWarmUpSnapshotDir] = dir
	ws := workerFiles(e.o.RunDir)
	if len(ws) == 0 {
		return fmt.Errorf("no worker PID files under %s", e.o.RunDir)
	}
	placeProducers(&in, ws) // as the measured run, so it builds the same placement
	id := fmt.Sprintf("%s-%s", in.Name, e.stamp)
	label := "[large-state warm-up " + in.Name + "]"
	t0 := time.Now()
	run, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		return fmt.Errorf("start workflow %s: %w", id, err)
	}
	w.WorkflowID = run.GetID()
	fmt.Printf("%s started %s: %d records as fast as the pipeline takes them (at most %d s), snapshot into %s\n", label, id, in.Producer.MaxEvents, in.TotalRuntimeSeconds, dir)
	res, err := runner.Follow(ctx, run, label, in.TotalRuntimeSeconds, runner.RunLimit(in, e.o.Margin))
	if err != nil {
		if runner.Stopping(ctx, err) {
			_ = runner.Stop(e.tc, run, "koala bench: warm-up: "+err.Error())
		}
		return err
	}
	w.Seconds, w.Events = time.Since(t0).Seconds(), res.Produced
	runner.WriteRawResult(e.o.ResultsDir, "warmup-"+in.Name, res)
	m, err := activities.ReadSnapshotManifest(dir)
	if err != nil {
		return err
	}
	w.Keys, w.Bytes = m.Keys, m.Bytes
	return nil
}

// checkWarmUpFits says why a warm-up's snapshot could not be loaded into
// the measured run, or returns nil: the same query, state backend (Pebble),
// buckets, parallelism of every operator, and job parameters that shape
// the state (DummyFieldSize); the warm-up must build and the measured run
// load.
func checkWarmUpFits(warm, measured workflows.ExperimentInput, operator string) error {
	switch {
	case warm.Params[control.ParamIsWarmUp] != "true":
		return fmt.Errorf("the warm-up config does not set IsWarmUp")
	case measured.Params[control.ParamLoadWarmUpData] != "true":
		return fmt.Errorf("the measured config does not set LoadWarmUpData")
	case warm.QueryName != measured.QueryName:
		return fmt.Errorf("query %q vs %q", warm.QueryName, measured.QueryName)
	case warm.StateBackend != "pebble" || measured.StateBackend != "pebble":
		return fmt.Errorf("state backends %q and %q: snapshots are of Pebble state", warm.StateBackend, measured.StateBackend)
	case warm.NumBuckets != measured.NumBuckets:
		return fmt.Errorf("NumBuckets %d vs %d", warm.NumBuckets, measured.NumBuckets)
	case !maps.Equal(warm.Parallelism, measured.Parallelism):
		return fmt.Errorf("parallelism %v vs %v", warm.Parallelism, measured.Parallelism)
	case warm.Parallelism[operator] == 0:
		return fmt.Errorf("no operator %q", operator)
	case warm.Params[control.ParamDummyFieldSize] != measured.Params[control.ParamDummyFieldSize]:
		return fmt.Errorf("DummyFieldSize %q vs %q", warm.Params[control.ParamDummyFieldSize], measured.Params[control.ParamDummyFieldSize])
	}
	return nil
}
