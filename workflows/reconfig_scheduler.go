package workflows

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"koala/dataplane/control"
	"koala/workflows/plan"
)

// versionConcurrentReconfigs marks RunExperiment runs that schedule
// reconfigurations with reconfigScheduler (concurrent across operators,
// and the "reconfigure" update). Runs recorded before it replay the
// sequential loop of runQueuedReconfigs.
const versionConcurrentReconfigs = "concurrent-reconfigs"

// reconfigScheduler runs the reconfigurations of one experiment as child
// workflows, from the config's timeline and from "reconfigure" update
// requests.
//
// Scheduling rule. Reconfigurations run in lanes; one child runs per lane
// at a time. With the lazy and DRRS protocols a lane is one operator:
// reconfigurations of different operators run concurrently, each planned
// from the deployment as it stands when it starts (the data plane keeps
// routing epochs per operator, so they do not undo each other's routing),
// and each result is merged back operator by operator (plan.Merge). Two
// for the same operator never overlap: a config-scheduled one whose
// operator is busy waits in a FIFO and starts the moment the running one
// completes, planned from its result; a requested one (update) is
// rejected instead, naming the running workflow, because the caller can
// retry with knowledge of the outcome while a queued request would run
// against a deployment the caller has not seen. Stop-and-restart pauses
// every source of the job, so under it the whole job is a single lane.
//
// All state is touched only from workflow coroutines, which Temporal runs
// one at a time; lanes are looked up, never iterated.
type reconfigScheduler struct {
	ctx      workflow.Context
	in       ExperimentInput
	jobID    string
	workers  []control.WorkerInfo
	start    time.Time
	dep      control.Deployment
	perOp    bool                    // lanes are operators (else one lane for the job)
	running  map[string]string       // lane → reconfiguration id running in it
	queues   map[string][]queuedSpec // lane → specs waiting for it
	tickets  int                     // submissions so far
	launched map[int]string          // ticket → reconfiguration id, once started
	outcomes []ReconfigOutcome       // by launch order (id suffix - 1)
	done     map[string]error        // reconfiguration id → result, once completed
	pending  int                     // launched or queued, not completed
	err      error                   // first failed reconfiguration
	live     bool                    // tasks run: requests may be accepted
	closed   bool                    // input ended: requests are refused
	timeline bool                    // every config-scheduled spec was submitted
	// hold, when set, delays a launch while it is true: a checkpoint is
	// being taken (run_checkpoints.go).
	hold func() bool
	// swapped, when tracked (non-nil), holds the deployment of each
	// running reconfiguration that reported its routing swap
	// (run_checkpoints_migration.go).
	swapped map[string]control.Deployment
	// specs holds every submitted spec by ticket; timelineSpecs the
	// config's, in trigger order, of which timelineNext were submitted;
	// gen counts recoveries: goroutines of an earlier one only record
	// their end (run_recovery_reconfigs.go).
	specs         map[int]ReconfigSpec
	timelineSpecs []ReconfigSpec
	timelineNext  int
	gen           int
	// requested marks the tickets of update requests: one whose plan is
	// invalid fails its request, not the job (rejectedPlan).
	requested map[int]bool
	// Recoveries and requests (run_recovery_reconfigs.go). lostWorker,
	// set in runs that take checkpoints, names the worker whose loss the
	// run is recovering from; rerunAs maps a ticket a recovery submitted
	// again to its new ticket (0: not run again, its effect was already
	// in the recovered deployment); abandoned is set once the run gave up
	// recovering; waiting counts the steps of accepted requests still
	// waiting for their trigger time, which stay pending across a recovery.
	lostWorker func() (string, bool)
	rerunAs    map[int]int
	abandoned  bool
	waiting    int
}

func newReconfigScheduler(ctx workflow.Context, in ExperimentInput, jobID string) *reconfigScheduler {
	return &reconfigScheduler{
		ctx: ctx, in: in, jobID: jobID,
		perOp:   in.ReconfigProtocol != ProtocolStopAndRestart && in.ReconfigProtocol != "",
		running: map[string]string{}, queues: map[string][]queuedSpec{}, done: map[string]error{}, launched: map[int]string{},
		specs: map[int]ReconfigSpec{}, requested: map[int]bool{}, rerunAs: map[int]int{},
	}
}

// goLive starts accepting requests once the job's tasks run.
func (s *reconfigScheduler) goLive(dep control.Deployment, workers []control.WorkerInfo, start time.Time) {
	s.dep, s.workers, s.start, s.live = dep, workers, start, true
}

func (s *reconfigScheduler) lane(op string) string {
	if s.perOp {
		return op
	}
	return ""
}

// runTimeline submits the config's reconfigurations at their trigger
// times (ties: config order).
func (s *reconfigScheduler) runTimeline(specs []ReconfigSpec) {
	specs = append([]ReconfigSpec(nil), specs...)
	sort.SliceStable(specs, func(i, j int) bool { return specs[i].TriggerTimeSeconds < specs[j].TriggerTimeSeconds })
	s.timelineSpecs, s.timelineNext = specs, 0
	s.runTimelineFrom(0)
}

// runTimelineFrom submits timelineSpecs[from:] at their trigger times.
func (s *reconfigScheduler) runTimelineFrom(from int) {
	specs, gen := s.timelineSpecs[from:], s.gen
	s.pending += len(specs) // the run is not over while any is still to come
	workflow.Go(s.ctx, func(ctx workflow.Context) {
		defer func() {
			if gen == s.gen {
				s.timeline = true
			}
		}()
		for _, spec := range specs {
			if err := sleepUntil(ctx, s.start, spec.TriggerTimeSeconds); err != nil {
				if gen == s.gen {
					s.fail(err)
				}
				return
			}
			if s.err != nil || gen != s.gen {
				return
			}
			s.pending--
			s.timelineNext++
			s.submit(spec)
		}
	})
}

// queuedSpec waits for its lane.
type queuedSpec struct {
	spec   ReconfigSpec
	ticket int
}

// submit starts spec now, or queues it behind its lane's running child,
// and returns its ticket: launched[ticket] is its id once it started.
func (s *reconfigScheduler) submit(spec ReconfigSpec) int {
	s.tickets++
	ticket := s.tickets
	s.specs[ticket] = spec
	lane := s.lane(spec.TargetOperator)
	if _, busy := s.running[lane]; busy {
		s.queues[lane] = append(s.queues[lane], queuedSpec{spec: spec, ticket: ticket})
		s.pending++
		return ticket
	}
	s.launch(spec, ticket)
	return ticket
}

// launch starts spec as a child workflow planned from the current
// deployment; on completion its result is merged in and the lane's next
// queued spec starts. A task migration that leaves its task or worker out
// gets them chosen here (task_migration_choice.go); the outcome records
// the completed spec.
func (s *reconfigScheduler) launch(spec ReconfigSpec, ticket int) {
	lane := s.lane(spec.TargetOperator)
	spec, chooseErr := completeMigration(s.ctx, spec, s.dep, s.workers)
	id := fmt.Sprintf("%s-reconfig-%d", s.jobID, len(s.outcomes)+1)
	s.running[lane] = id
	s.launched[ticket] = id
	s.pending++
	slot := len(s.outcomes)
	began := workflow.Now(s.ctx)
	s.outcomes = append(s.outcomes, ReconfigOutcome{
		ID: id, WorkflowID: id, Spec: spec, Protocol: s.in.ReconfigProtocol, StartSec: began.Sub(s.start).Seconds(),
	})
	input := ReconfigureInput{ReconfigID: id, Current: s.dep, Spec: spec, Workers: s.workers, NotifyRoutesSwapped: s.swapped != nil}
	summary := migrationSummary(spec, s.dep, s.workers) // shown in the Temporal UI; no command compares it
	gen := s.gen
	workflow.Go(s.ctx, func(ctx workflow.Context) {
		child, err := childFor(s.in.ReconfigProtocol)
		if err == nil {
			err = chooseErr
		}
		var out ReconfigureResult
		if err == nil && s.hold != nil && s.hold() {
			err = workflow.Await(ctx, func() bool { return !s.hold() })
		}
		if err == nil {
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id, StaticSummary: summary})
			err = workflow.ExecuteChildWorkflow(cctx, child, input).Get(ctx, &out)
		}
		o := &s.outcomes[slot]
		o.EndSec, o.Steps, o.Moves = workflow.Now(ctx).Sub(s.start).Seconds(), out.Steps, out.Moves
		showMoves(ctx, s.outcomes)
		s.done[id] = err
		if gen != s.gen {
			return // cancelled by a recovery, which submitted it again
		}
		delete(s.running, lane)
		delete(s.swapped, id)
		s.pending--
		if err != nil && !s.rejectedPlan(ctx, ticket, err) {
			s.fail(err)
			return
		}
		if err == nil {
			s.dep = plan.Merge(s.dep, out.Deployment)
		}
		if q := s.queues[lane]; len(q) > 0 && s.err == nil {
			s.queues[lane] = q[1:]
			s.pending--
			s.launch(q[0].spec, q[0].ticket)
		}
	})
}

// versionRequestPlanRejected marks runs in which a requested
// reconfiguration whose plan step refused it fails only its request;
// before it, it failed the whole run.
const versionRequestPlanRejected = "request-plan-rejected"

// rejectedPlan reports whether err, the failure of the reconfiguration of
// ticket, is a requested one's refusal to plan (InvalidReconfiguration,
// e.g. a rebalance of tasks that measured no load yet): it changed
// nothing, so the request fails and the job goes on. The update's
// validator cannot see such refusals coming: the plan step measures.
func (s *reconfigScheduler) rejectedPlan(ctx workflow.Context, ticket int, err error) bool {
	if !s.requested[ticket] || !hasErrType(err, "InvalidReconfiguration") {
		return false
	}
	return workflow.GetVersion(ctx, versionRequestPlanRejected, workflow.DefaultVersion, 1) == 1
}

// hasErrType reports whether an ApplicationError of type typ is anywhere
// in err's chain (a child's error wraps its step's).
func hasErrType(err error, typ string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) {
			return false
		}
		if appErr.Type() == typ {
			return true
		}
		err = appErr
	}
	return false
}

func (s *reconfigScheduler) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// finish waits until the input has ended, then until every
// reconfiguration submitted so far has completed (or one failed). From
// the end of the input on, requests are refused.
func (s *reconfigScheduler) finish(ctx workflow.Context, totalSec int) error {
	if d := s.start.Add(time.Duration(totalSec) * time.Second).Sub(workflow.Now(ctx)); d > 0 {
		if _, err := workflow.AwaitWithTimeout(ctx, d, func() bool { return s.err != nil }); err != nil {
			return err
		}
	}
	s.closed = true
	if err := workflow.Await(ctx, func() bool { return s.err != nil || (s.timeline && s.pending == 0) }); err != nil {
		return err
	}
	return s.err
}
