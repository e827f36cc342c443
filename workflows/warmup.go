package workflows

import (
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/activities"
	"koala/dataplane/control"
	"koala/dataplane/produce"
)

// Warm-up state, as in the Koala artifact: a warm-up run ("IsWarmUp")
// produces a bounded sequential key stream (NumEvents records per
// producer) and snapshots every stateful task's state at its end; a
// measurement run ("LoadWarmUpData") loads that snapshot into its tasks
// before they start and resumes the generator where the warm-up stopped
// ("OutputEventNumber", by default the snapshot's key count for the
// sequential generator and its event count for others).

// warmUpVersion guards the warm-up steps of RunExperiment.
const warmUpVersion = "warm-up-snapshot"

// warmUp is the warm-up configuration of one run.
type warmUp struct {
	save, load bool
	numEvents  int64 // per producer (save), or of the warm-up to load
	resume     int64 // OutputEventNumber; -1 when not given
	dir        string
}

func warmUpOf(in ExperimentInput) (warmUp, error) {
	w := warmUp{save: in.Params[control.ParamIsWarmUp] == "true", load: in.Params[control.ParamLoadWarmUpData] == "true", resume: -1, dir: in.Params[control.ParamWarmUpSnapshotDir]}
	num := func(name string) (int64, error) {
		v, err := strconv.ParseInt(in.Params[name], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%s %q: want a whole number ≥ 0", name, in.Params[name])
		}
		return v, nil
	}
	var err error
	if in.Params[control.ParamNumEvents] != "" {
		if w.numEvents, err = num(control.ParamNumEvents); err != nil {
			return w, err
		}
	}
	if in.Params[control.ParamOutputEventNumber] != "" {
		if w.resume, err = num(control.ParamOutputEventNumber); err != nil {
			return w, err
		}
	}
	switch {
	case w.save && w.load:
		return w, fmt.Errorf("%s and %s are both true: a run either builds warm-up state or loads it", control.ParamIsWarmUp, control.ParamLoadWarmUpData)
	case w.save && w.numEvents <= 0:
		return w, fmt.Errorf("%s needs %s > 0 (records per producer), got %d", control.ParamIsWarmUp, control.ParamNumEvents, w.numEvents)
	case w.save && len(in.Reconfigurations) > 0:
		return w, fmt.Errorf("%s: a warm-up run builds state only; it has %d Reconfigurations", control.ParamIsWarmUp, len(in.Reconfigurations))
	case w.load && w.dir == "" && w.numEvents <= 0:
		return w, fmt.Errorf("%s needs %s or the warm-up's %s to find the snapshot", control.ParamLoadWarmUpData, control.ParamWarmUpSnapshotDir, control.ParamNumEvents)
	}
	return w, nil
}

func (w warmUp) active() bool { return w.save || w.load }

// warmUpStart runs before the tasks start: it checks the warm-up settings
// and, for a measurement run, loads the snapshot into the deployed tasks.
// It returns the settings and the loaded manifest (zero when none).
func warmUpStart(ctx workflow.Context, in ExperimentInput, dep control.Deployment) (warmUp, activities.SnapshotManifest, error) {
	var m activities.SnapshotManifest
	w, err := warmUpOf(in)
	if err != nil {
		return w, m, temporal.NewNonRetryableApplicationError("invalid experiment: "+err.Error(), "BadConfig", nil)
	}
	if !w.active() || workflow.GetVersion(ctx, warmUpVersion, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return warmUp{}, m, nil
	}
	if w.load {
		actx := workflow.WithActivityOptions(ctx, stepOptions())
		err = workflow.ExecuteActivity(actx, a.LoadSnapshot, activities.SnapshotInput{Deployment: dep, Dir: w.dir, NumEvents: w.numEvents}).Get(ctx, &m)
	}
	return w, m, err
}

// warmUpProducers shapes the producers of a warm-up or measurement run.
// Warm-up: producer i emits the generator's records i·NumEvents …
// (i+1)·NumEvents−1, and the sequential generator's key space is
// NumEvents × producers, so every record has a new key. Measurement: every
// producer resumes at the resume point (see the constants above).
func warmUpProducers(in ExperimentInput, w warmUp, m activities.SnapshotManifest, ps []activities.ProducerInput) []activities.ProducerInput {
	out := append([]activities.ProducerInput(nil), ps...)
	for i := range out {
		r := &out[i].Request
		switch {
		case w.save:
			r.StartEvent, r.MaxEvents = int64(i)*w.numEvents, w.numEvents
			if r.Generator == produce.SequentialGenerator {
				r.NumKeys = int(w.numEvents) * len(out)
			}
		case w.load && r.Nexmark != nil && r.Nexmark.OutputEventNumber > 0:
			// The Nexmark generator resumes at its own OutputEventNumber.
		case w.load:
			r.StartEvent = resumePoint(w, m, r.Generator)
		}
	}
	return out
}

func resumePoint(w warmUp, m activities.SnapshotManifest, generator string) int64 {
	switch {
	case w.resume >= 0:
		return w.resume
	case generator == produce.SequentialGenerator:
		return int64(m.Keys)
	}
	return m.NumEvents * int64(max(m.Producers, 1))
}

// warmUpInputEnd waits for the end of the input: a warm-up's input ends
// once every warm-up record reached the sinks (at the latest at
// TotalRuntimeSeconds; warmUpEnd then reports the shortfall); every other
// run's at TotalRuntimeSeconds.
func warmUpInputEnd(ctx workflow.Context, w warmUp, dep control.Deployment, start time.Time, in ExperimentInput) error {
	if !w.save {
		return sleepUntil(ctx, start, in.TotalRuntimeSeconds)
	}
	left := start.Add(time.Duration(in.TotalRuntimeSeconds) * time.Second).Sub(workflow.Now(ctx))
	opts := stepOptions()
	opts.StartToCloseTimeout = max(left, 0) + time.Minute
	actx := workflow.WithActivityOptions(ctx, opts)
	want := uint64(w.numEvents) * uint64(max(in.Producer.Producers, 1))
	return workflow.ExecuteActivity(actx, a.AwaitSinkRecords, activities.AwaitSinkInput{Deployment: dep, Want: want, TimeoutSecs: max(left.Seconds(), 0)}).Get(ctx, nil)
}

// warmUpEnd runs after a warm-up run drained: every record it was to
// produce must have been produced, then every stateful task's state is
// snapshotted. Other runs pass through.
func warmUpEnd(ctx workflow.Context, in ExperimentInput, w warmUp, dep control.Deployment, produced int64) error {
	if !w.save {
		return nil
	}
	want := w.numEvents * int64(max(in.Producer.Producers, 1))
	if produced != want {
		err := fmt.Errorf("warm-up produced %d of its %d records (NumEvents %d × %d producers) before TotalRuntimeSeconds %d: raise TotalRuntimeSeconds or RatePerSecond", produced, want, w.numEvents, max(in.Producer.Producers, 1), in.TotalRuntimeSeconds)
		return temporal.NewNonRetryableApplicationError(err.Error(), "BadConfig", nil)
	}
	actx := workflow.WithActivityOptions(ctx, stepOptions())
	var m activities.SnapshotManifest
	return workflow.ExecuteActivity(actx, a.SnapshotState, activities.SnapshotInput{
		Deployment: dep, Dir: w.dir, NumEvents: w.numEvents, Producers: max(in.Producer.Producers, 1), Generator: in.Producer.Generator,
	}).Get(ctx, &m)
}
