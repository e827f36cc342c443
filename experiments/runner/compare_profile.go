package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"koala/dataplane/control"
	"koala/deploy/local"
	"koala/experiments"
	"koala/experiments/cpuprof"
	"koala/workflows"
)

// koala compare --profile: every worker's CPU profile over a window that
// ends a second before a run's first trigger and over windows that start
// at given seconds after it (by default at the trigger, covering the swap
// and a bulk move, and from +15 s, covering the drain), so each
// comparison names what took the cores when a protocol dipped or drained
// slowly. A Go process takes one CPU profile at a time, so the windows
// may not overlap.

// ProfileOptions configure the profiles of koala compare --profile.
type ProfileOptions struct {
	// RunDir is where `koala stack up --worker-pprof` recorded the
	// workers' profiling endpoints.
	RunDir string
	// After are where the windows after the trigger start, in seconds
	// from the first trigger, ascending; Seconds is each window's length.
	After   []int
	Seconds int
}

// Validate checks the windows against base's first trigger.
func (p ProfileOptions) Validate(base workflows.ExperimentInput) error {
	if p.Seconds < 1 || p.Seconds > 120 {
		return fmt.Errorf("--profile-seconds %d: want 1 to 120", p.Seconds)
	}
	if len(p.After) == 0 {
		return fmt.Errorf("--profile-after: name at least one window after the trigger (seconds from it, e.g. 0,15)")
	}
	for i, a := range p.After {
		if a < 0 {
			return fmt.Errorf("--profile-after %d: want 0 or more seconds after the trigger", a)
		}
		if i > 0 && a < p.After[i-1]+p.Seconds {
			return fmt.Errorf("--profile-after %d after %d: windows of %d s would overlap (a worker takes one CPU profile at a time); want ascending starts at least --profile-seconds apart",
				a, p.After[i-1], p.Seconds)
		}
	}
	trig, ok := firstTrigger(base)
	if !ok {
		return fmt.Errorf("--profile: config %s has no Reconfigurations: there is no trigger to profile around", base.Name)
	}
	if before := trig - 1 - p.Seconds; before < 0 {
		return fmt.Errorf("--profile-seconds %d: the first trigger is at %d s, so a window ending 1 s before it cannot last %d s (want at most %d)",
			p.Seconds, trig, p.Seconds, max(trig-1, 0))
	}
	last := p.After[len(p.After)-1]
	if end := trig + last + p.Seconds; end > base.TotalRuntimeSeconds {
		return fmt.Errorf("--profile-after %d --profile-seconds %d: that window after the trigger (%d s) would end at %d s, past the run's %d s",
			last, p.Seconds, trig, end, base.TotalRuntimeSeconds)
	}
	return nil
}

// firstTrigger is the earliest TriggerTimeSeconds of in.
func firstTrigger(in workflows.ExperimentInput) (int, bool) {
	if len(in.Reconfigurations) == 0 {
		return 0, false
	}
	t := in.Reconfigurations[0].TriggerTimeSeconds
	for _, r := range in.Reconfigurations[1:] {
		t = min(t, r.TriggerTimeSeconds)
	}
	return t, true
}

// profiler takes the profiles of a comparison's runs.
type profiler struct {
	opts      ProfileOptions
	dir       string // <comparison>/profiles
	endpoints []local.WorkerEndpoint
}

// newProfiler finds the workers' endpoints; none serving one is an error
// that names the stack flag.
func newProfiler(o ProfileOptions, base workflows.ExperimentInput, dir string) (*profiler, error) {
	if err := o.Validate(base); err != nil {
		return nil, err
	}
	eps, notes, err := cpuprof.Endpoints(o.RunDir)
	for _, n := range notes {
		fmt.Println("  profile:", n)
	}
	if err != nil {
		return nil, err
	}
	p := &profiler{opts: o, dir: filepath.Join(dir, "profiles"), endpoints: eps}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	return p, nil
}

// runProfile is one run's profiling, in the background.
type runProfile struct {
	done chan struct{}
	stop context.CancelFunc // gives up windows not yet started
	out  []experiments.WorkerProfile
}

// start profiles run's workers around its first trigger; nil p: no
// profiles.
func (p *profiler) start(ctx context.Context, tc client.Client, run client.WorkflowRun, variant string, in workflows.ExperimentInput, label string) *runProfile {
	if p == nil {
		return nil
	}
	trigSec, _ := firstTrigger(in)
	pre, stop := context.WithCancel(ctx)
	rp := &runProfile{done: make(chan struct{}), stop: stop}
	go func() {
		defer close(rp.done)
		started, err := cpuprof.WaitProducersStarted(pre, tc, run, time.Duration(in.TotalRuntimeSeconds)*time.Second+10*time.Minute)
		trig := started.Add(time.Duration(trigSec) * time.Second)
		type window struct {
			name string
			from int // seconds from the trigger
		}
		windows := []window{{experiments.WindowBefore, -1 - p.opts.Seconds}}
		for _, a := range p.opts.After {
			windows = append(windows, window{experiments.WindowAfter, a})
		}
		for _, w := range windows {
			if err == nil {
				select {
				case <-pre.Done():
					err = fmt.Errorf("the run ended before the window opened")
				case <-time.After(time.Until(trig.Add(time.Duration(w.from) * time.Second))):
				}
			}
			rp.out = append(rp.out, p.window(ctx, variant, w.name, w.from, err)...)
		}
		for _, wp := range rp.out {
			if wp.Error != "" {
				fmt.Printf("%s profile %s %s: %s\n", label, wp.Window, wp.Worker, wp.Error)
			}
		}
	}()
	return rp
}

// window takes one profile of every worker (or records why not: cause).
func (p *profiler) window(ctx context.Context, variant, name string, from int, cause error) []experiments.WorkerProfile {
	out := make([]experiments.WorkerProfile, len(p.endpoints))
	var wg sync.WaitGroup
	for i, ep := range p.endpoints {
		out[i] = experiments.WorkerProfile{Window: name, FromSec: float64(from), Seconds: p.opts.Seconds, Worker: ep.ID}
		if cause != nil {
			out[i].Error = cause.Error()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(p.dir, fmt.Sprintf("%s-%s%+d-%s.pprof", variant, name, from, ep.ID))
			if err := cpuprof.Fetch(ctx, ep.Addr, p.opts.Seconds, path); err != nil {
				out[i].Error = err.Error()
				return
			}
			out[i].File = path
			prof, err := cpuprof.Read(path)
			if err == nil {
				var s cpuprof.Split
				if s, err = cpuprof.Breakdown(prof, cpuprof.WorkerCategories, cpuprof.PebbleReads); err == nil {
					out[i].Split = &s
				}
			}
			if err != nil {
				out[i].Error = err.Error()
			}
		}()
	}
	wg.Wait()
	return out
}

// wait gives up windows not yet begun, waits for one being taken, and
// returns the profiles with the tasks each worker ran at the end (final
// may be empty: a failed run). A nil rp returns nil.
func (rp *runProfile) wait(final control.Deployment) []experiments.WorkerProfile {
	if rp == nil {
		return nil
	}
	rp.stop()
	<-rp.done
	tasks := map[string][]string{}
	for _, t := range final.Tasks {
		tasks[t.WorkerID] = append(tasks[t.WorkerID], fmt.Sprintf("%s-%d", t.Operator, t.Index))
	}
	for i := range rp.out {
		ts := tasks[rp.out[i].Worker]
		sort.Strings(ts)
		rp.out[i].Tasks = ts
	}
	return rp.out
}

// profileLines are a run's profiles as printed after it: each worker's
// cores and its three largest kinds of work per window.
func profileLines(label string, ps []experiments.WorkerProfile) []string {
	names := cpuprof.Names(cpuprof.WorkerCategories)
	var out []string
	for _, p := range ps {
		if p.Split == nil || len(p.Split.Shares) != len(names) {
			continue
		}
		idx := make([]int, len(names))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return p.Split.Shares[idx[a]] > p.Split.Shares[idx[b]] })
		var top []string
		for _, i := range idx[:3] {
			top = append(top, fmt.Sprintf("%s %.0f %%", names[i], p.Split.Shares[i]))
		}
		out = append(out, fmt.Sprintf("%s profile %s (%+.0f s) %s (%s): %.2f cores; %s", label, p.Window, p.FromSec, p.Worker,
			strings.Join(p.Tasks, ","), p.Split.CPUSec/float64(max(p.Seconds, 1)), strings.Join(top, ", ")))
	}
	return out
}
