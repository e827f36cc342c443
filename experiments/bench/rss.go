package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/experiments/runner"
	"koala/workflows"
)

// benchRSS runs the keyed counter offered far above its ceiling, so that the
// backlog grows in Kafka, and samples every worker's VmRSS.
func benchRSS(ctx context.Context, o Options, tc client.Client, ch *metrics.ClickHouse, stamp string) RSSRun {
	r := RSSRun{Status: experiments.StatusFailed}
	in, err := experiments.LoadConfig(o.RSSConfig)
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	runner.DefaultBrokers(&in, o.Kafka)
	in.Reconfigurations = nil
	in.Name = in.Name + "-rss"
	if o.RSSRate > 0 {
		in.Producer.RatePerSec = o.RSSRate
	}
	if o.RSSSec > 0 {
		in.TotalRuntimeSeconds = o.RSSSec
	}
	// Only the producing window is measured, but the backlog must drain for
	// the job to end cleanly (a drain timeout fails the run and would leave
	// its tasks to the workflow's clean-up): allow for it.
	in.DrainTimeoutSeconds = max(in.DrainTimeoutSeconds, 2*in.TotalRuntimeSeconds)
	r.Query, r.Rate, r.RuntimeSec = in.QueryName, in.Producer.RatePerSec, in.TotalRuntimeSeconds
	label := "[rss " + in.QueryName + "]"
	workers := workerFiles(o.RunDir)
	if len(workers) == 0 {
		r.Reason = "no worker PID files under " + o.RunDir
		return r
	}
	sampler := startRSSSampler(workers, o.RSSInterval)

	id := fmt.Sprintf("%s-%s", in.Name, stamp)
	run, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, in)
	if err != nil {
		sampler.stop()
		r.Reason = fmt.Sprintf("start workflow %s: %v", id, err)
		return r
	}
	r.WorkflowID = run.GetID()
	fmt.Printf("%s started %s at %d ev/s for %d s, sampling RSS of %d workers every %s\n", label, id, r.Rate, r.RuntimeSec, len(workers), o.RSSInterval)
	limit := time.Duration(in.TotalRuntimeSeconds+in.DrainTimeoutSeconds)*time.Second + o.Margin
	runStart := time.Now()
	res, err := runner.Follow(ctx, run, label, in.TotalRuntimeSeconds, limit)
	samples := sampler.stop()
	// Keep the samples of the producing window only: the drain after it
	// empties the backlog, which is not backpressure.
	end := runStart.Add(time.Duration(in.TotalRuntimeSeconds) * time.Second)
	if !res.StartedAt.IsZero() {
		end = res.StartedAt.Add(time.Duration(in.TotalRuntimeSeconds) * time.Second)
	}
	r.SamplesByPID = map[int][]RSSSample{}
	for _, w := range workers {
		var kept []RSSSample
		for _, s := range samples[w.pid] {
			if !s.At.After(end) {
				kept = append(kept, s)
			}
		}
		r.SamplesByPID[w.pid] = kept
		r.Workers = append(r.Workers, SummarizeRSS(w.name, w.pid, kept))
	}
	if err != nil && !runner.Stopping(ctx, err) {
		r.Reason = err.Error()
		return r
	}
	if err != nil {
		_ = runner.Stop(tc, run, "koala bench: "+err.Error())
		r.Reason = err.Error()
		return r
	}
	runner.WriteRawResult(o.ResultsDir, "rss-"+in.QueryName, res)
	r.JobID, r.Produced = res.JobID, res.Produced
	r.Status = experiments.StatusOK
	if ch != nil {
		runner.Sleep(ctx, o.FlushWait)
		r.LagRead, r.LagAtStart, r.LagAtHalf, r.LagAtEnd, r.SinkEvents = rssLag(ctx, ch, res, in.TotalRuntimeSeconds)
	}
	for _, w := range r.Workers {
		fmt.Printf("%s %s pid %d: %d samples, max %.1f MB, last half mean %.1f MB, slope %+.3f MB/s, growth %+.1f %% → %s\n",
			label, w.Worker, w.PID, w.Samples, w.MaxMB, w.LastHalfMeanMB, w.SlopeMBPerSec, 100*w.LastHalfGrowth, w.Verdict)
	}
	fmt.Printf("%s %s; %d produced, %.0f at the sink by the end of the job\n", label, r.lagText(), r.Produced, r.SinkEvents)
	if grew, why := r.LagGrowth(); !grew {
		fmt.Printf("%s not measured: %s\n", label, why)
	}
	return r
}

// rssLag reads the source lag at the start, half time and end of the
// producing window, and the sink's total, from ClickHouse; ok is false
// when the lag could not be read.
func rssLag(ctx context.Context, ch *metrics.ClickHouse, res workflows.ExperimentResult, total int) (ok bool, start, half, end, sink float64) {
	jobStart, err := ch.JobStart(ctx, res.JobID)
	if err != nil {
		return false, 0, 0, 0, 0
	}
	offset := 0.0
	if !res.StartedAt.IsZero() {
		offset = res.StartedAt.Sub(jobStart).Seconds()
	}
	at := func(ps []metrics.Point, t float64) float64 {
		v := 0.0
		for _, p := range ps {
			if p.Sec <= t {
				v = p.Value
			}
		}
		return v
	}
	if lag, err := ch.Lag(ctx, res.JobID); err == nil && len(lag) > 0 {
		ok = true
		start, half, end = at(lag, offset), at(lag, offset+float64(total)/2), at(lag, offset+float64(total)-1)
	}
	if tp, err := ch.Throughput(ctx, res.JobID, runner.SinkOperator(res)); err == nil {
		for _, p := range tp {
			sink += p.Value
		}
	}
	return ok, start, half, end, sink
}

type workerFile struct {
	name string
	pid  int
}

// workerFiles reads <runDir>/worker-<name>.pid.
func workerFiles(runDir string) []workerFile {
	files, _ := filepath.Glob(filepath.Join(runDir, "worker-*.pid"))
	sort.Strings(files)
	var out []workerFile
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			out = append(out, workerFile{strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "worker-"), ".pid"), pid})
		}
	}
	return out
}

type rssSampler struct {
	mu      sync.Mutex
	samples map[int][]RSSSample
	ticks   *periodic
}

// startRSSSampler records each worker's VmRSS every interval; a process that
// cannot be read (exited) gets no sample.
func startRSSSampler(ws []workerFile, interval time.Duration) *rssSampler {
	s := &rssSampler{samples: map[int][]RSSSample{}}
	take := func() {
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, w := range ws {
			if b, err := ProcRSS(w.pid); err == nil {
				s.samples[w.pid] = append(s.samples[w.pid], RSSSample{At: now, Bytes: b})
			}
		}
	}
	s.ticks = startPeriodic(interval, false, take)
	return s
}

func (s *rssSampler) stop() map[int][]RSSSample {
	s.ticks.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}
