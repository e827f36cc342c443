package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"koala/dataplane/metrics"
	"koala/deploy/local"
	"koala/workflows"
)

// Config is one soak.
type Config struct {
	Stack     local.Config // the running stack the soak acts on
	Seed      uint64
	Duration  time.Duration
	Segment   time.Duration // default DefaultSegment
	Protocols []Protocol    // default Rotation
	// ResultsDir receives <ResultsDir>/soak-<seed>-<time>/: the event
	// table, the oracle's table, result.json and soak.png.
	ResultsDir string
	// KoalaBinary runs the state server of remote segments (`koala
	// statesvc`); without one, remote segments are left out.
	KoalaBinary string
	// WindowIdleTimeout is the window job's SourceIdleTimeoutMs (0: the
	// runtime's default).
	WindowIdleTimeout time.Duration
	Out               io.Writer     // live lines and tables (default os.Stdout)
	LiveEvery         time.Duration // default 5 s
}

// EventRecord is one event as it happened.
type EventRecord struct {
	Event
	Segment  int
	Protocol Protocol
	Start    time.Duration // from the soak's start
	Took     time.Duration
	OK       bool
	// Rejected: the job's validator refused the reconfiguration (it
	// changed nothing), e.g. a task migration with one worker left.
	Rejected bool
	Outcome  string
}

// Result is a finished soak.
type Result struct {
	Seed       uint64
	Segments   []Segment
	Events     []EventRecord
	Checks     []Check
	Recoveries int
	Dir, PNG   string
	samples    []sample
}

// Tally counts the events that happened.
type Tally struct {
	ReconfDone, ReconfRejected, ReconfFailed int
	Faults, FaultsFailed                     int
}

// Counts tallies the events.
func (r *Result) Counts() Tally {
	var t Tally
	for _, e := range r.Events {
		switch {
		case e.Reconfig != nil && e.OK:
			t.ReconfDone++
		case e.Reconfig != nil && e.Rejected:
			t.ReconfRejected++
		case e.Reconfig != nil:
			t.ReconfFailed++
		case e.Fault != nil:
			t.Faults++
			if !e.OK {
				t.FaultsFailed++
			}
		}
	}
	return t
}

// Exact reports whether every check of every job found nothing wrong.
func (r *Result) Exact() bool {
	for _, c := range r.Checks {
		if !c.Exact() {
			return false
		}
	}
	return len(r.Checks) > 0
}

// driver is the state of a running soak.
type driver struct {
	cfg         Config
	tc          client.Client
	ch          *metrics.ClickHouse
	begin       time.Time
	taskWorkers []string
	producer    string
	remote      string // state server address, for remote segments

	mu      sync.Mutex
	res     Result
	running map[int]string // event seq -> what runs
	jobs    []string       // workflow ids of the current segment
	seg     Segment
	updSeq  int
}

// Run plans the soak from the seed, runs it on the stack and checks every
// job's output. The error says what was not exact or what failed; the
// result is returned in any case.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.LiveEvery <= 0 {
		cfg.LiveEvery = 5 * time.Second
	}
	workers := cfg.Stack.WorkerIDs()
	if len(workers) < 2 {
		return nil, fmt.Errorf("the stack runs %d worker(s); the soak needs at least 2 (one runs the producers, the others the tasks)", len(workers))
	}
	d := &driver{cfg: cfg, taskWorkers: workers[:len(workers)-1], producer: workers[len(workers)-1], running: map[int]string{}}
	protocols := cfg.Protocols
	if cfg.KoalaBinary == "" && len(protocols) == 0 {
		protocols = []Protocol{LazyEventual, StopAndRestart, LazyFetchOnDemand, DRRS}
		fmt.Fprintln(cfg.Out, "note: no koala binary for a state server: remote segments are left out")
	}
	segs, err := Plan(Options{Seed: cfg.Seed, Duration: cfg.Duration, Segment: cfg.Segment, Protocols: protocols,
		TaskWorkers: d.taskWorkers, Workers: workers})
	if err != nil {
		return nil, err
	}
	d.res = Result{Seed: cfg.Seed, Segments: segs}
	printPlan(cfg.Out, cfg.Seed, segs, d.taskWorkers, d.producer)

	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.tc, err = client.DialContext(ctx, client.Options{HostPort: cfg.Stack.TemporalAddr(), Namespace: "default", Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("dial Temporal at %s: %w", cfg.Stack.TemporalAddr(), err)
	}
	defer d.tc.Close()
	d.ch = metrics.NewClickHouse(cfg.Stack.ClickHouseURL(), cfg.Stack.ClickHouseNativeAddr(), "koala")
	defer d.ch.Close(context.Background())
	for _, s := range segs {
		if s.Protocol == Remote {
			stop, addr, err := startStateServer(ctx, cfg.KoalaBinary, cfg.Stack.RunDir)
			if err != nil {
				return nil, err
			}
			defer stop()
			d.remote = addr
			break
		}
	}

	d.begin = time.Now()
	liveCtx, stopLive := context.WithCancel(ctx)
	liveDone := make(chan struct{})
	go func() { defer close(liveDone); d.live(liveCtx) }()
	var errs []error
	for _, s := range segs {
		if err := d.runSegment(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("segment %d (%s): %w", s.Index, s.Protocol, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	stopLive()
	<-liveDone

	res := d.result()
	if err := d.report(ctx, res); err != nil {
		errs = append(errs, err)
	}
	for _, c := range res.Checks {
		if !c.Exact() {
			// The examples too: a CI log keeps the end of a long report.
			errs = append(errs, fmt.Errorf("segment %d (%s) %s: lost=%d duplicated=%d reordered=%d late=%d %s%s", c.Segment, c.Protocol, c.Query,
				c.Lost, c.Duplicated, max(c.Reordered, 0), c.Late, c.Err, c.examples()))
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("soak with seed %d (rerun: %s): %w", cfg.Seed, rerun(cfg, protocols), errors.Join(errs...))
	}
	return res, nil
}

func (d *driver) result() *Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.res
	return &r
}

// runSegment starts the segment's three jobs, fires its events at their
// times, waits for the jobs to end and checks their outputs.
func (d *driver) runSegment(ctx context.Context, seg Segment) error {
	stamp := time.Now().UTC().Format("150405")
	var specs []JobSpec
	for _, q := range Queries {
		id := fmt.Sprintf("soak-%d-%s-s%d-%s", d.cfg.Seed, stamp, seg.Index, q)
		out := id + "-out"
		if err := createTopic(ctx, d.cfg.Stack.KafkaBrokers(), out); err != nil {
			return err
		}
		in, err := jobInput(q, seg, d.cfg.Seed, d.taskWorkers, d.producer, d.cfg.Stack.KafkaBrokers(), out, d.remote, d.cfg.WindowIdleTimeout)
		if err != nil {
			return err
		}
		specs = append(specs, JobSpec{Query: q, WorkflowID: id, OutTopic: out, Input: in})
	}
	segStart := time.Now()
	runs := make([]client.WorkflowRun, len(specs))
	ids := make([]string, len(specs))
	for i, s := range specs {
		run, err := d.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: s.WorkflowID, TaskQueue: workflows.TaskQueue}, workflows.RunExperiment, s.Input)
		if err != nil {
			return fmt.Errorf("start %s: %w", s.WorkflowID, err)
		}
		runs[i], ids[i] = run, s.WorkflowID
	}
	d.mu.Lock()
	d.jobs, d.seg = ids, seg
	d.mu.Unlock()
	fmt.Fprintf(d.cfg.Out, "[%s] segment %d: %s, %ds of input, jobs %s\n", d.elapsed(), seg.Index, seg.Protocol, int(seg.Length/time.Second), strings.Join(ids, ", "))

	var wg sync.WaitGroup
	faults := make(chan Event, len(seg.Events))
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One fault at a time: a restart finishes before the next fault.
		for ev := range faults {
			d.fire(ctx, seg, ev, ids)
		}
	}()
	for _, ev := range seg.Events {
		if err := pause(ctx, time.Until(segStart.Add(ev.At))); err != nil {
			break
		}
		if ev.Fault != nil {
			faults <- ev
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.fire(ctx, seg, ev, ids) }()
	}
	close(faults)

	results := make([]workflows.ExperimentResult, len(runs))
	runErrs := make([]error, len(runs))
	for i, run := range runs {
		wctx, cancel := context.WithTimeout(ctx, time.Until(segStart.Add(seg.Length+8*time.Minute)))
		runErrs[i] = getResult(wctx, d.tc, run, &results[i])
		cancel()
	}
	wg.Wait()

	var errs []error
	for i, s := range specs {
		c := Check{Segment: seg.Index, Protocol: seg.Protocol, Query: s.Query, WorkflowID: s.WorkflowID}
		if runErrs[i] != nil {
			c.Late = -1 // not read: the job has no result
			c.Err = fmt.Sprintf("the job failed: %s", innermost(runErrs[i]))
			errs = append(errs, fmt.Errorf("%s: %w", s.WorkflowID, runErrs[i]))
			_ = d.tc.TerminateWorkflow(context.Background(), s.WorkflowID, "", "soak: the job failed")
		} else {
			r := results[i]
			check(ctx, d.cfg.Stack.KafkaBrokers(), &c, r.Topic, s.OutTopic)
			var first, last float64
			c.Late, first, last = d.lateRecords(ctx, s.WorkflowID)
			if c.Late > 0 {
				c.example("%d records dropped as late by the job's operators, in seconds %.0f-%.0f of the job", c.Late, first, last)
			}
			// The sink's own ledger, where the query passes records
			// through (the counter): it must agree.
			if r.Lost != 0 || r.Duplicated != 0 || r.Reordered != 0 {
				c.example("sink ledger: lost=%d duplicated=%d reordered=%d", r.Lost, r.Duplicated, r.Reordered)
				if c.Err == "" {
					c.Err = "the sink's ledger counted errors"
				}
			}
			if r.Checkpoints != nil {
				d.mu.Lock()
				d.res.Recoveries += len(r.Checkpoints.Recoveries)
				d.mu.Unlock()
			}
			d.collectSeries(ctx, s, r.StartedAt)
		}
		fmt.Fprintf(d.cfg.Out, "[%s] segment %d %s %s: %s\n", d.elapsed(), seg.Index, seg.Protocol, s.Query, c.verdict())
		d.mu.Lock()
		d.res.Checks = append(d.res.Checks, c)
		d.mu.Unlock()
	}
	d.mu.Lock()
	d.jobs = nil
	d.mu.Unlock()
	return errors.Join(errs...)
}

// verdict is the check as one line.
func (c Check) verdict() string {
	if c.Err != "" && c.Inputs == 0 {
		return "ERROR " + c.Err
	}
	reord := fmt.Sprint(c.Reordered)
	if c.Reordered < 0 {
		reord = "n/a"
	}
	s := fmt.Sprintf("inputs %d, outputs %d of %d expected: lost=%d duplicated=%d reordered=%s", c.Inputs, c.Outputs, c.Expected, c.Lost, c.Duplicated, reord)
	if c.Err != "" {
		s += " ERROR " + c.Err
	}
	return s + c.examples()
}

// examples are the check's examples, one indented line each.
func (c Check) examples() string {
	if len(c.Examples) == 0 {
		return ""
	}
	return "\n    e.g. " + strings.Join(c.Examples, "\n    e.g. ")
}

// getResult waits for a run's result, through Temporal restarts.
func getResult(ctx context.Context, tc client.Client, run client.WorkflowRun, out *workflows.ExperimentResult) error {
	for {
		err := tc.GetWorkflow(ctx, run.GetID(), run.GetRunID()).Get(ctx, out)
		var ended *temporal.WorkflowExecutionError
		if err == nil || errors.As(err, &ended) || !transient(err) || ctx.Err() != nil {
			return err // the job's own failure, whatever its cause says
		}
		if err := pause(ctx, time.Second); err != nil {
			return err
		}
	}
}

// ended reports whether the workflow id no longer runs.
func (d *driver) ended(ctx context.Context, id string) bool {
	desc, err := d.tc.DescribeWorkflowExecution(ctx, id, "")
	return err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enums.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// fire carries out one event and records it.
func (d *driver) fire(ctx context.Context, seg Segment, ev Event, jobs []string) {
	start := time.Now()
	d.mu.Lock()
	d.running[ev.Seq] = ev.String()
	d.mu.Unlock()
	var outcome string
	var err error
	if ev.Fault != nil {
		outcome, err = d.inject(ctx, *ev.Fault, jobs)
	} else {
		outcome, err = d.reconfigure(ctx, *ev.Reconfig, jobs)
	}
	rec := EventRecord{Event: ev, Segment: seg.Index, Protocol: seg.Protocol, Start: start.Sub(d.begin), Took: time.Since(start), OK: err == nil, Outcome: outcome}
	if err != nil {
		rec.Outcome = strings.TrimSpace(outcome + ": " + innermost(err))
		// The validator's refusals name the job; they run nothing.
		rec.Rejected = ev.Reconfig != nil && strings.Contains(err.Error(), "reconfigure job ")
	}
	d.mu.Lock()
	delete(d.running, ev.Seq)
	d.res.Events = append(d.res.Events, rec)
	d.mu.Unlock()
	status := "done"
	switch {
	case rec.Rejected:
		status = "rejected"
	case !rec.OK:
		status = "FAILED"
	}
	fmt.Fprintf(d.cfg.Out, "[%s] #%d %s: %s in %.1fs: %s\n", d.elapsed(), ev.Seq, ev, status, rec.Took.Seconds(), rec.Outcome)
}

func (d *driver) elapsed() string {
	return time.Since(d.begin).Round(time.Second).String()
}

// createTopic creates the one-partition output topic: the sink's writes
// keep their order in it, so the oracle can check each key's order.
func createTopic(ctx context.Context, brokers []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// innermost is the end of a chain of wrapped Temporal errors, where the
// cause is; the chain's "(type: …, workflowID: …)" parts say only where.
func innermost(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "): "); i >= 0 {
		return msg[i+3:]
	}
	return msg
}

// rerun is the command that replays the soak's plan.
func rerun(cfg Config, protocols []Protocol) string {
	s := fmt.Sprintf("koala soak --seed %d --minutes %g", cfg.Seed, cfg.Duration.Minutes())
	if cfg.Segment != 0 && cfg.Segment != DefaultSegment {
		s += " --segment " + cfg.Segment.String()
	}
	if len(protocols) > 0 {
		s += " --protocols " + strings.ReplaceAll(joinAny(protocols), ", ", ",")
	}
	if cfg.WindowIdleTimeout != 0 {
		s += " --window-idle-timeout " + cfg.WindowIdleTimeout.String()
	}
	return s
}
