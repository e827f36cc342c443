package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/client"

	"koala/activities"
	"koala/experiments"
	"koala/workflows"
)

// Building warm-up state once
//
// `koala warmup CONFIG` builds the warm-up snapshot that CONFIG builds
// (IsWarmUp) or loads (LoadWarmUpData; its warm-up config is found beside
// it, experiments.FindWarmUp), unless the snapshot is there already, and
// shows its progress. `koala compare` builds a missing snapshot the same
// way before its runs (BuildWarmUp). The snapshot stays where the config
// puts it, under $KOALA_HOME by default, for every later run to load.

// WarmUpOptions configure WarmUp.
type WarmUpOptions struct {
	Services
	Config  string                 // a warm-up config or one that loads its snapshot
	Run     experiments.RunOptions // --scale and host mapping, as for koala run
	Rebuild bool                   // remove an existing snapshot and build it again
	Build   BuildOptions
}

// BuildOptions say how a warm-up run is followed.
type BuildOptions struct {
	// DialNATS connects to the workers' NATS for the progress (records,
	// state size); nil or failing: the progress shows the elapsed time only.
	DialNATS func() (*nats.Conn, error)
	Out      io.Writer     // progress and summary; os.Stdout when nil
	Margin   time.Duration // the run is given up this long after its runtime + drain timeout
	// Terminator names the command in the reason a given-up workflow is
	// terminated with.
	Terminator string
}

// WarmUp builds the snapshot of o.Config's warm-up, or says that it is
// built (keys, bytes, path) and leaves it.
func WarmUp(ctx context.Context, o WarmUpOptions) error {
	out := outOr(o.Build.Out)
	t, notes, err := experiments.FindWarmUp(o.Config, o.Run)
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "note:", n)
	}
	if err != nil {
		return err
	}
	if t.Built && !o.Rebuild {
		m, err := activities.ReadSnapshotManifest(t.Dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "warm-up snapshot exists: %d keys, %s, built %s (%d records)\n  snapshot: %s\n  (--rebuild removes it and builds it again)\n",
			m.Keys, gbText(m.Bytes), m.CreatedAt.Local().Format("2006-01-02 15:04"), m.NumEvents*int64(max(m.Producers, 1)), t.Dir)
		return nil
	}
	if t.Config == "" {
		return fmt.Errorf("--rebuild: no warm-up config found beside %s that builds %s; run koala warmup on the warm-up config", o.Config, t.Dir)
	}
	if t.Loader != "" {
		fmt.Fprintf(out, "%s loads the snapshot %s; %s builds it\n", t.Loader, t.Dir, t.Config)
	}
	if t.Built {
		if err := experiments.RemoveSnapshot(t.Dir); err != nil {
			return fmt.Errorf("--rebuild: %w", err)
		}
		fmt.Fprintf(out, "removed the warm-up snapshot %s (--rebuild)\n", t.Dir)
	}
	_, err = BuildWarmUp(ctx, o.Services, t, o.Build)
	return err
}

// BuildWarmUp runs t's warm-up config as a RunExperiment workflow, shows
// its progress, and returns the manifest of the snapshot it built after
// printing its keys, bytes, seconds and path.
func BuildWarmUp(ctx context.Context, s Services, t experiments.WarmUpTarget, o BuildOptions) (activities.SnapshotManifest, error) {
	out := outOr(o.Out)
	in := t.Input
	DefaultBrokers(&in, s.Brokers)
	total := warmUpTotal(in)
	id := fmt.Sprintf("%s-%s", in.Name, time.Now().Format("20060102-150405"))
	started := time.Now()
	run, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		return activities.SnapshotManifest{}, fmt.Errorf("start warm-up workflow %s: %w", id, err)
	}
	fmt.Fprintf(out, "warm-up %s started: %d records into %s\n  workflow: %s\n  ui:       %s\n", t.Config, total, t.Dir, id,
		UILink(s.UIURL, s.Namespace, run.GetID(), run.GetRunID()))

	var sampler *jobSampler
	if o.DialNATS != nil {
		nc, err := o.DialNATS()
		if err == nil {
			defer nc.Close()
			sampler, err = newJobSampler(nc, workflows.JobIDFor(run.GetID()), in)
		}
		if err != nil {
			fmt.Fprintf(out, "  (no records or state size in the progress: %v)\n", err)
		} else {
			defer sampler.Close()
		}
	}
	res, err := followWarmUp(ctx, run, sampler, newProgressView(out, total), total, started, RunLimit(in, o.Margin))
	if err != nil {
		if stopping(ctx, err) {
			if terr := Stop(s.Temporal, run, o.Terminator+": warm-up: "+err.Error()); terr != nil {
				err = fmt.Errorf("%w (terminate: %v)", err, terr)
			}
		}
		return activities.SnapshotManifest{}, fmt.Errorf("warm-up workflow %s: %w", id, err)
	}
	secs := time.Since(started).Seconds()
	if !s.KeepTopics {
		DropRunTopics(ctx, out, in.KafkaBrokers, res.Topic)
	}
	m, err := activities.ReadSnapshotManifest(t.Dir)
	if err != nil {
		return m, fmt.Errorf("warm-up workflow %s finished (%d records produced): %w", id, res.Produced, err)
	}
	fmt.Fprintf(out, "warm-up snapshot built: %d keys, %s (%d bytes) in %.0f s, %d records\n  snapshot: %s\n", m.Keys, gbText(m.Bytes), m.Bytes, secs, res.Produced, t.Dir)
	return m, nil
}

// followWarmUp waits for the warm-up workflow, sampling its progress once
// a second into view; with a limit above zero it gives up after it
// (ErrGaveUp).
func followWarmUp(ctx context.Context, run client.WorkflowRun, sampler *jobSampler, view progressView, total int64, started time.Time, limit time.Duration) (workflows.ExperimentResult, error) {
	var res workflows.ExperimentResult
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run.Get(gctx, &res) }()
	defer view.finish()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	expired, stopDeadline := deadline(limit)
	defer stopDeadline()
	var meter rateMeter
	p := warmUpProgress{Total: total}
	for {
		select {
		case err := <-done:
			return res, err
		case <-expired:
			return res, fmt.Errorf("%w (%s)", ErrGaveUp, limit)
		case now := <-tick.C:
			p.Elapsed = now.Sub(started)
			if sampler != nil {
				if rec, bytes, ok := sampler.sample(gctx); ok {
					reading := total <= 0 || p.Records < total // the rate stays as it was once all are read
					p.Records, p.StateBytes, p.Sampled = max(rec, p.Records), bytes, true
					if reading {
						p.Rate = meter.rate(now, p.Records)
					}
				}
			}
			view.update(p)
		}
	}
}

func outOr(w io.Writer) io.Writer {
	if w == nil {
		return os.Stdout
	}
	return w
}
