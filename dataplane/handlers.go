package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

// requestTimeout bounds the work of one control request on the worker.
const requestTimeout = 30 * time.Second

func (w *Worker) handleRequest(msg *nats.Msg) {
	if msg.Subject == control.SubjectPing {
		data, _ := json.Marshal(w.info())
		_ = msg.Respond(data)
		return
	}
	// Requests run concurrently so a slow pause does not hold up a status call.
	go w.serve(msg)
}

func (w *Worker) serve(msg *nats.Msg) {
	verb := control.VerbOf(w.opts.ID, msg.Subject)
	body, err := w.dispatch(verb, msg.Data)
	reply := control.Reply{Version: control.Version}
	if err != nil {
		reply.Error = err.Error()
		w.log.Warn("control request failed", "verb", verb, "err", err)
	} else if body != nil {
		raw, mErr := json.Marshal(body)
		if mErr != nil {
			reply.Error = fmt.Sprintf("encode reply: %v", mErr)
		}
		reply.Body = raw
	}
	data, _ := json.Marshal(reply)
	if msg.Reply != "" {
		if err := msg.Respond(data); err != nil {
			w.log.Warn("reply", "verb", verb, "err", err)
		}
	}
}

func decodeBody[T any](env control.Envelope) (T, error) {
	var v T
	if len(env.Body) == 0 {
		return v, nil
	}
	if err := json.Unmarshal(env.Body, &v); err != nil {
		return v, fmt.Errorf("decode %T: %w", v, err)
	}
	return v, nil
}

func (w *Worker) dispatch(verb string, data []byte) (any, error) {
	env, err := control.DecodeEnvelope(data)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(w.ctx, requestTimeout)
	defer cancel()
	switch verb {
	case control.VerbDeploy:
		req, err := decodeBody[control.DeployRequest](env)
		if err != nil {
			return nil, err
		}
		return nil, w.deploy(req)
	case control.VerbStart:
		req, err := decodeBody[control.TasksRequest](env)
		if err != nil {
			return nil, err
		}
		for _, t := range w.jobTasks(env.JobID, req.TaskIDs) {
			t.start(w.ctx)
		}
		return nil, nil
	case control.VerbPause:
		req, err := decodeBody[control.BarrierRequest](env)
		if err != nil {
			return nil, err
		}
		return nil, w.sourceCommand(ctx, env.JobID, req.TaskIDs, sourceCmd{kind: "pause", barrierID: req.BarrierID})
	case control.VerbResume:
		req, err := decodeBody[control.TasksRequest](env)
		if err != nil {
			return nil, err
		}
		return nil, w.sourceCommand(ctx, env.JobID, req.TaskIDs, sourceCmd{kind: "resume"})
	case control.VerbFinish:
		req, err := decodeBody[control.FinishRequest](env)
		if err != nil {
			return nil, err
		}
		return nil, w.sourceCommand(ctx, env.JobID, nil, sourceCmd{kind: "finish", barrierID: req.BarrierID, endOffsets: req.EndOffsets})
	case control.VerbRouting:
		req, err := decodeBody[control.RoutingRequest](env)
		if err != nil {
			return nil, err
		}
		if req.Deployment.Job.JobID != env.JobID {
			return nil, fmt.Errorf("routing: deployment is for job %q, request for job %q", req.Deployment.Job.JobID, env.JobID)
		}
		// Only a switch of routes (job-wide or in-band) is remembered for
		// tasks created later: a routing update of a few tasks prepares new
		// owners before their key lookup tables arrived, and nothing may
		// route to them yet.
		if req.InBand || len(req.TaskIDs) == 0 {
			w.learn(req.Deployment)
		}
		if req.InBand {
			return nil, w.onTaskGoroutines(ctx, env.JobID, req.TaskIDs, func(ctx context.Context, t *task) error {
				return t.applyRouting(ctx, req)
			})
		}
		if req.OpenGates {
			if len(req.TaskIDs) == 0 {
				return nil, fmt.Errorf("routing: open_gates needs task_ids (the new owners)")
			}
			return nil, w.onTaskGoroutines(ctx, env.JobID, req.TaskIDs, func(_ context.Context, t *task) error {
				t.openGainedGates(req.Deployment)
				return nil
			})
		}
		return nil, w.updateRouting(env.JobID, req.TaskIDs, req.Deployment)
	case control.VerbHandoff:
		req, err := decodeBody[control.HandoffRequest](env)
		if err != nil {
			return nil, err
		}
		if len(req.TaskIDs) == 0 {
			return nil, fmt.Errorf("handoff: task_ids must name the old owners")
		}
		if req.Deployment.Job.JobID != env.JobID {
			return nil, fmt.Errorf("handoff: deployment is for job %q, request for job %q", req.Deployment.Job.JobID, env.JobID)
		}
		return nil, w.onTaskGoroutines(ctx, env.JobID, req.TaskIDs, func(ctx context.Context, t *task) error {
			if t.keyed == nil && !req.Ordered {
				return fmt.Errorf("handoff: task %s keeps no keyed state (only an ordered handoff, which moves no state, applies to it)", t.id)
			}
			if req.Operator != "" && t.opName != req.Operator {
				return fmt.Errorf("handoff of operator %q: task %s belongs to operator %q", req.Operator, t.id, t.opName)
			}
			return t.handoff(ctx, req.Deployment, env.ReconfigID, req.Mode == "eager", req.Ordered)
		})
	case control.VerbStop:
		req, err := decodeBody[control.TasksRequest](env)
		if err != nil {
			return nil, err
		}
		return nil, w.stopTasks(ctx, env.JobID, req.TaskIDs)
	case control.VerbStatus:
		req, err := decodeBody[control.TasksRequest](env)
		if err != nil {
			return nil, err
		}
		reply := control.StatusReply{WorkerID: w.opts.ID}
		for _, t := range w.jobTasks(env.JobID, req.TaskIDs) {
			reply.Tasks = append(reply.Tasks, t.status(req))
		}
		return reply, nil
	case control.VerbProduceStart:
		req, err := decodeBody[control.ProduceRequest](env)
		if err != nil {
			return nil, err
		}
		return nil, w.startProducer(env.JobID, req)
	case control.VerbProduceStop:
		req, err := decodeBody[control.ProduceStopRequest](env)
		if err != nil {
			return nil, err
		}
		return w.stopProducer(ctx, env.JobID, req.Producer)
	}
	if body, ok, err := w.dispatchSnapshot(ctx, verb, env); ok { // snapshot.go
		return body, err
	}
	if body, ok, err := w.dispatchCheckpoint(ctx, verb, env); ok { // checkpoint_barrier.go
		return body, err
	}
	return nil, fmt.Errorf("worker %s: unknown verb %q", w.opts.ID, verb)
}

// jobTasks returns the named tasks of job (all of them when ids is empty),
// sorted by id.
func (w *Worker) jobTasks(jobID string, ids []string) []*task {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*task
	if len(ids) == 0 {
		for _, t := range w.tasks {
			if t.jobID == jobID {
				out = append(out, t)
			}
		}
	} else {
		for _, id := range ids {
			if t := w.tasks[jobID+"/"+id]; t != nil {
				out = append(out, t)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// learn merges dep into the newest per-operator routing this worker has
// switched to for dep's job. Tasks created here later start from it, so a
// task deployed by one reconfiguration still routes to the operators
// another one switched meanwhile (control.MergeNewer). Only switches are
// learnt: a deployment whose new owners do not hold their key lookup
// tables yet must not reach a task that routes to them.
func (w *Worker) learn(dep control.Deployment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known == nil {
		w.known = map[string]control.Deployment{}
	}
	w.known[dep.Job.JobID], _ = control.MergeNewer(w.known[dep.Job.JobID], dep)
}

// switched is dep with the routing this worker switched to where newer.
func (w *Worker) switched(dep control.Deployment) control.Deployment {
	w.mu.Lock()
	defer w.mu.Unlock()
	merged, _ := control.MergeNewer(dep, w.known[dep.Job.JobID])
	return merged
}

// deploy creates the requested tasks; tasks that already exist are kept, so
// a retried deploy is harmless.
func (w *Worker) deploy(req control.DeployRequest) error {
	refs := map[string]control.TaskRef{}
	for _, t := range req.Deployment.Tasks {
		refs[t.ID] = t
	}
	for _, id := range req.TaskIDs {
		ref, ok := refs[id]
		if !ok {
			return fmt.Errorf("deploy: task %q is not in the deployment", id)
		}
		if ref.WorkerID != w.opts.ID {
			return fmt.Errorf("deploy: task %q is placed on worker %q, not %q", id, ref.WorkerID, w.opts.ID)
		}
		key := req.Deployment.Job.JobID + "/" + id
		w.mu.Lock()
		_, exists := w.tasks[key]
		w.mu.Unlock()
		if exists {
			continue
		}
		t, err := w.createTask(w.switched(req.Deployment), ref, req.StartOffsets)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.tasks[key] = t
		latest, ok := w.known[req.Deployment.Job.JobID]
		w.mu.Unlock()
		if ok {
			// A switch learnt while the task was being built did not reach it.
			t.mergeView(latest)
		}
	}
	return nil
}

// updateRouting installs, on every named task of the job here, the
// operators of dep whose routing epoch is newer than the task's; stale or
// repeated updates change nothing.
func (w *Worker) updateRouting(jobID string, ids []string, dep control.Deployment) error {
	if dep.Job.JobID != jobID {
		return fmt.Errorf("routing: deployment is for job %q, request for job %q", dep.Job.JobID, jobID)
	}
	w.learn(dep)
	for _, t := range w.jobTasks(jobID, ids) {
		t.mergeView(dep)
	}
	return nil
}

// onTaskGoroutines runs fn on the goroutine of each named task, ordered
// with the records it processes, and waits for all of them.
func (w *Worker) onTaskGoroutines(ctx context.Context, jobID string, ids []string, fn func(context.Context, *task) error) error {
	tasks := w.jobTasks(jobID, ids)
	if len(ids) > 0 && len(tasks) != len(ids) {
		return fmt.Errorf("worker %s: job %q has %d of the tasks %v here", w.opts.ID, jobID, len(tasks), ids)
	}
	for _, t := range tasks {
		if !t.started.Load() {
			return fmt.Errorf("task %s is not running", t.id)
		}
		if t.source != nil {
			if err := t.command(ctx, sourceCmd{kind: "run", fn: fn}); err != nil {
				return fmt.Errorf("task %s: %w", t.id, err)
			}
			continue
		}
		// Counted before it queues: a task that waits on a hold sends on
		// until it has run it (route_hold.go), which may be what makes
		// room in its inbox.
		t.ctlQueued.Add(1)
		t.nudgeControl()
		item := &controlItem{fn: func(ctx context.Context, t *task) error {
			t.ctlQueued.Add(-1)
			return fn(ctx, t)
		}, reply: make(chan error, 1)}
		select {
		case t.inbox <- &wire.Frame{Kind: wire.FrameControl, Ctl: item}:
		case <-ctx.Done():
			t.ctlQueued.Add(-1)
			return fmt.Errorf("task %s: %w", t.id, ctx.Err())
		}
		select {
		case err := <-item.reply:
			if err != nil {
				return fmt.Errorf("task %s: %w", t.id, err)
			}
		case <-ctx.Done():
			return fmt.Errorf("task %s: %w", t.id, ctx.Err())
		}
	}
	return nil
}

func (w *Worker) sourceCommand(ctx context.Context, jobID string, ids []string, cmd sourceCmd) error {
	for _, t := range w.jobTasks(jobID, ids) {
		if t.source == nil {
			continue
		}
		if !t.started.Load() {
			return fmt.Errorf("%s source %s: task is not running", cmd.kind, t.id)
		}
		if err := t.command(ctx, cmd); err != nil {
			return fmt.Errorf("%s source %s: %w", cmd.kind, t.id, err)
		}
	}
	return nil
}

func (w *Worker) stopTasks(ctx context.Context, jobID string, ids []string) error {
	w.mu.Lock()
	if w.stoppedJobs == nil {
		w.stoppedJobs = map[string]bool{}
	}
	w.stoppedJobs[jobID] = true // frames still in flight to them are stale (worker.go)
	w.mu.Unlock()
	for _, t := range w.jobTasks(jobID, ids) {
		// What its handoffs still queue for new owners (forwarded records,
		// the marker opening their gates) goes out before it stops.
		if err := t.awaitHandoffSends(ctx); err != nil {
			return err
		}
		if err := t.stop(ctx); err != nil {
			return err
		}
		w.mu.Lock()
		delete(w.tasks, t.key())
		w.mu.Unlock()
	}
	w.mu.Lock()
	for _, t := range w.tasks {
		if t.jobID == jobID {
			w.mu.Unlock()
			return nil
		}
	}
	delete(w.known, jobID) // the job has no task left here
	w.mu.Unlock()
	if w.peers != nil {
		w.peers.CloseJob(jobID)
	}
	w.holds.forgetJob(jobID)
	return w.removeJobDir(jobID)
}

// removeJobDir deletes the job's task directories (Pebble state, WAL) once
// the job has no task on this worker: a long-lived worker would otherwise
// keep every finished job's state on disk. Snapshots and checkpoints are
// hard-linked copies elsewhere and outlive it; a task of the job deployed
// here later starts from an empty directory, as it would on any other
// worker.
func (w *Worker) removeJobDir(jobID string) error {
	if w.opts.DataDir == "" {
		return nil
	}
	if jobID == "" || jobID == "." || jobID == ".." || strings.ContainsAny(jobID, `/\`) {
		return fmt.Errorf("job id %q is not a plain directory name; its data directory is left in place", jobID)
	}
	if err := os.RemoveAll(filepath.Join(w.opts.DataDir, jobID)); err != nil {
		return fmt.Errorf("job %s: removing its data directory: %w", jobID, err)
	}
	return nil
}

// controlItem is work a control request needs done on a task goroutine, so
// it is ordered with the records the task processes and emits. It rides in
// a wire.FrameControl frame's Ctl.
type controlItem struct {
	fn    func(ctx context.Context, t *task) error
	reply chan error
}
