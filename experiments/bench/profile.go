package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"koala/deploy/local"
	"koala/experiments"
	"koala/experiments/cpuprof"
)

// koala bench --profile: CPU profiles of every worker over each steady-state
// run's measurement window (from the endpoints `koala stack up
// --worker-pprof` records in the run dir), and go test -cpuprofile for the
// micro-benchmarks; summarised into the report's Profiles section.

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
	eps, notes, err := cpuprof.Endpoints(o.RunDir)
	if err != nil {
		return nil, fmt.Errorf("%w (or `make bench-profile`)", err)
	}
	p.endpoints, p.notes = eps, notes
	var with []string
	for _, ep := range eps {
		with = append(with, ep.ID)
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
		started, err := cpuprof.WaitProducersStarted(pre, tc, run, time.Duration(runtimeSec)*time.Second+10*time.Minute)
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
				errs[i] = cpuprof.Fetch(ctx, ep.Addr, secs, paths[i])
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
