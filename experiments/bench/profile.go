package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"koala/deploy/local"
	"koala/experiments"
)

// koala bench --profile: CPU profiles of every worker over each steady-state
// run's measurement window (from the endpoints `koala stack up
// --worker-pprof` records in the run dir), and go test -cpuprofile for the
// micro-benchmarks; summarised into the report's Profiles section.

// activityStartProducer is the activity type that starts a producer (the
// method name of activities.Activities).
const activityStartProducer = "StartProducer"

// benchProfiles collects the profiles of one bench run.
type benchProfiles struct {
	dir       string // <results>/run-<stamp>/profiles
	maxSec    int    // cap on one steady profile's duration (0: the whole window)
	endpoints []local.WorkerEndpoint

	mu     sync.Mutex
	steady []ProfileSummary
	micro  []ProfileSummary
	notes  []string
}

// newBenchProfiles prepares the profiles directory and finds the workers'
// endpoints. With the steady phase selected and no worker serving one, it
// is an error that names the flag the stack needs.
func newBenchProfiles(o Options, stamp string, workers bool) (*benchProfiles, error) {
	p := &benchProfiles{dir: filepath.Join(o.ResultsDir, "run-"+stamp, "profiles"), maxSec: o.ProfileSec}
	if o.ProfileSec < 0 {
		return nil, fmt.Errorf("--profile-seconds %d: allowed: 0 (the whole measurement window) or more", o.ProfileSec)
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	if !workers { // no phase profiles workers: the micro-benchmarks only
		return p, nil
	}
	eps, err := local.WorkerPprofEndpoints(o.RunDir)
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	var with []string
	for _, ep := range eps {
		if ep.Addr != "" {
			p.endpoints = append(p.endpoints, ep)
			with = append(with, ep.ID)
		} else {
			p.notes = append(p.notes, fmt.Sprintf("worker %s (pid %d) not profiled: %s", ep.ID, ep.PID, ep.Why))
		}
	}
	if len(p.endpoints) == 0 {
		return nil, fmt.Errorf("--profile: no running worker under %s serves a pprof endpoint (%d running workers, no worker-wN%s address file); "+
			"restart the stack with it: `koala stack down --run-dir %s` then `koala stack up --run-dir %s --worker-pprof` (or `make bench-profile`)",
			o.RunDir, len(eps), local.PprofFileSuffix, o.RunDir, o.RunDir)
	}
	fmt.Printf("profile: steady-state CPU profiles of workers %s into %s\n", strings.Join(with, ","), p.dir)
	for _, n := range p.notes {
		fmt.Println("profile:", n)
	}
	return p, nil
}

// report is the profiles part of the bench report.
func (p *benchProfiles) report() *BenchProfiles {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return &BenchProfiles{Dir: p.dir, Steady: p.steady, Micro: p.micro, Notes: p.notes}
}

// steadyProfile is one run's profiling, in the background.
type steadyProfile struct {
	done        chan struct{}
	stopWaiting context.CancelFunc // ends the wait for the window, not a profile being taken
}

// wait is called once the run ended: a profile not yet started is given up,
// one being taken is finished, saved and summarised. A nil steadyProfile (no
// --profile) returns at once.
func (s *steadyProfile) wait() {
	if s != nil {
		s.stopWaiting()
		<-s.done
	}
}

// startSteadyProfile profiles every worker over the measurement window of
// run: it waits until the workflow has started its producers, then until
// the window opens (warm-up plus the two seconds ComputeSteady skips), and
// takes one CPU profile per worker for the window's length (or
// --profile-seconds, if shorter). nil without --profile.
func startSteadyProfile(ctx context.Context, o Options, tc client.Client, run client.WorkflowRun, query string, runtimeSec int) *steadyProfile {
	p := o.profiles
	if p == nil {
		return nil
	}
	pre, stopWaiting := context.WithCancel(ctx)
	s := &steadyProfile{done: make(chan struct{}), stopWaiting: stopWaiting}
	label := "[profile " + query + "]"
	go func() {
		defer close(s.done)
		sum := ProfileSummary{Name: query}
		defer func() {
			p.mu.Lock()
			p.steady = append(p.steady, sum)
			p.mu.Unlock()
		}()
		fail := func(err error) {
			sum.Errors = append(sum.Errors, err.Error())
			fmt.Println(label, err)
		}
		started, err := waitProducersStarted(pre, tc, run, time.Duration(runtimeSec)*time.Second+10*time.Minute)
		if err != nil {
			fail(err)
			return
		}
		from, secs := profileWindow(started, runtimeSec, p.maxSec)
		if secs < 1 {
			fail(fmt.Errorf("runtime %d s leaves no measurement window to profile", runtimeSec))
			return
		}
		sum.Seconds = float64(secs)
		select {
		case <-pre.Done():
			fail(fmt.Errorf("run ended before its measurement window opened: no profile"))
			return
		case <-time.After(time.Until(from)):
		}
		fmt.Printf("%s %d s CPU profile of %d workers\n", label, secs, len(p.endpoints))
		paths := make([]string, len(p.endpoints))
		errs := make([]error, len(p.endpoints))
		var wg sync.WaitGroup
		for i, ep := range p.endpoints {
			paths[i] = filepath.Join(p.dir, query+"-"+ep.ID+".pprof")
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = fetchCPUProfile(ctx, ep.Addr, secs, paths[i])
			}()
		}
		wg.Wait()
		var got []string
		for i, ep := range p.endpoints {
			if errs[i] != nil {
				fail(fmt.Errorf("worker %s: %w", ep.ID, errs[i]))
				continue
			}
			got = append(got, paths[i])
		}
		sum = SummariseFiles(sum, got, TopHot)
		printTop(label, sum)
	}()
	return s
}

// profileWindow is when a run's profile starts and how many seconds it
// lasts: the steady-state window [start+warm-up+2 s, start+runtime-1 s),
// capped at maxSec when that is set.
func profileWindow(producersStarted time.Time, runtimeSec, maxSec int) (time.Time, int) {
	skip := int(experiments.CompareWarmupSec) + 2
	secs := runtimeSec - 1 - skip
	if maxSec > 0 && secs > maxSec {
		secs = maxSec
	}
	return producersStarted.Add(time.Duration(skip) * time.Second), secs
}

// waitProducersStarted polls run's history until its producers run and
// returns when they started; an error once the run closed first, or after
// limit.
func waitProducersStarted(ctx context.Context, tc client.Client, run client.WorkflowRun, limit time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		var events []*historypb.HistoryEvent
		it := tc.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		var err error
		for it.HasNext() {
			var ev *historypb.HistoryEvent
			if ev, err = it.Next(); err != nil {
				break
			}
			events = append(events, ev)
		}
		if err == nil {
			at, ok, closed := producersStarted(events)
			switch {
			case ok:
				return at, nil
			case closed:
				return time.Time{}, fmt.Errorf("workflow %s ended before its producers started: no profile", run.GetID())
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for the producers of %s: %w (last history read: %v)", run.GetID(), ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// producersStarted reads a RunExperiment history: the workflow starts its
// producers one StartProducer activity after another and then takes the
// run's start time. They all run once a StartProducer completed and the
// next workflow task completed without scheduling another; at is that
// task's time. closed reports a workflow that ended.
func producersStarted(events []*historypb.HistoryEvent) (at time.Time, ok, closed bool) {
	producerTasks := map[int64]bool{} // scheduled event id → is StartProducer
	var lastDone int64                // event id of the last completed StartProducer
	pendingAfter := false             // a StartProducer scheduled after lastDone
	for _, ev := range events {
		id := ev.GetEventId()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activityStartProducer {
				producerTasks[id] = true
				if lastDone != 0 {
					pendingAfter = true
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if producerTasks[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				lastDone, pendingAfter, at = id, false, time.Time{}
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if lastDone != 0 && !pendingAfter && at.IsZero() {
				at = ev.GetEventTime().AsTime()
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			closed = true
		}
	}
	// The task after the last completion must not have scheduled another
	// StartProducer: the scheduled event follows its completion event.
	if !at.IsZero() && !pendingAfter {
		return at, true, closed
	}
	return time.Time{}, false, closed
}

// fetchCPUProfile saves /debug/pprof/profile?seconds=secs of the worker at
// addr to path.
func fetchCPUProfile(ctx context.Context, addr string, secs int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+time.Minute)
	defer cancel()
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("GET %s: save %s: %w", url, path, err)
	}
	return nil
}

// printTop prints the top five of a summary.
func printTop(label string, s ProfileSummary) {
	for _, e := range s.Errors {
		fmt.Println(label, "missing:", e)
	}
	fmt.Printf("%s %.1f CPU-s sampled in %d files; top by flat CPU:\n", label, s.CPUSec, len(s.Files))
	for i, h := range s.Top {
		if i == 5 {
			break
		}
		fmt.Printf("  %5.1f %%  %5.1f %% cum  %s\n", h.FlatPct, h.CumPct, h.Function)
	}
}

// runMicro runs the micro-benchmarks one package at a time with -cpuprofile
// <dir>/micro-<package>.pprof (the test binary goes to a temporary file, not
// the working directory), summarises each profile and returns the combined
// go test output.
func (p *benchProfiles) runMicro(ctx context.Context, goBin string, args, pkgs []string, rep *BenchReport) []byte {
	tmp, err := os.MkdirTemp("", "koala-bench-micro-")
	if err != nil {
		rep.MicroError = "micro: " + err.Error()
		return nil
	}
	defer os.RemoveAll(tmp)
	var all []byte
	var cmds, errs []string
	for _, pkg := range pkgs {
		name := strings.Trim(strings.NewReplacer("/", "-", ".", "").Replace(pkg), "-")
		if name == "" {
			name = "root"
		}
		path := filepath.Join(p.dir, "micro-"+name+".pprof")
		a := append(append([]string(nil), args...), "-cpuprofile", path, "-o", filepath.Join(tmp, name+".test"), pkg)
		cmd := "go " + strings.Join(quoteArgs(a), " ")
		cmds = append(cmds, cmd)
		fmt.Println("micro:", cmd)
		out, err := exec.CommandContext(ctx, goBin, a...).CombinedOutput()
		all = append(all, out...)
		if err != nil {
			errs = append(errs, fmt.Sprintf("go test %s: %v: %s", pkg, err, lastLines(string(out), 5)))
		}
		sum := SummariseFiles(ProfileSummary{Name: pkg}, []string{path}, TopHot)
		printTop("[profile micro "+pkg+"]", sum)
		p.mu.Lock()
		p.micro = append(p.micro, sum)
		p.mu.Unlock()
	}
	rep.MicroCommand = strings.Join(cmds, "; ")
	rep.MicroError = strings.Join(errs, "; ")
	return all
}
