package soak

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"koala/dataplane/metrics"
	"koala/deploy/local"
	"koala/workflows"
)

// recoveryWithin bounds how long a killed worker stays down while the
// jobs notice its loss (10 s of silence) and recover without it.
const recoveryWithin = 2 * time.Minute

// serviceOf names the stack service a fault restarts.
var serviceOf = map[FaultKind]string{
	KillController:  "controller",
	RestartNATS:     "nats",
	RestartKafka:    "kafka",
	RestartTemporal: "temporal",
}

// inject carries out fault f on the stack and returns what happened (the
// outcome column of the final table). jobs are the running jobs' workflow
// ids: after a worker kill, the worker is started again only once every
// job recovered without it (a worker back before its loss was noticed
// would leave its tasks missing).
func (d *driver) inject(ctx context.Context, f Fault, jobs []string) (string, error) {
	cfg := d.cfg.Stack
	switch f.Kind {
	case KillController, RestartNATS, RestartKafka, RestartTemporal:
		name := serviceOf[f.Kind]
		pid, err := local.KillService(cfg, name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.Kind, err)
		}
		killed := time.Now()
		newPID, err := local.StartService(ctx, cfg, name)
		if err != nil {
			return "", fmt.Errorf("%s: start %s again: %w", f.Kind, name, err)
		}
		return fmt.Sprintf("pid %d killed, %d ready after %.1fs", pid, newPID, time.Since(killed).Seconds()), nil
	case KillWorker:
		name := "worker-" + f.Worker
		pid, err := local.KillService(cfg, name)
		if err != nil {
			return "", fmt.Errorf("%s: %w", f.Kind, err)
		}
		killed := time.Now()
		rec, waitErr := d.awaitRecoveries(ctx, jobs, f.Worker, killed)
		if _, err := local.StartService(ctx, cfg, name); err != nil {
			return "", fmt.Errorf("%s: start %s again: %w", f.Kind, name, err)
		}
		out := fmt.Sprintf("pid %d killed, %d/%d jobs recovered in %.1fs", pid, rec, len(jobs), time.Since(killed).Seconds())
		if waitErr != nil {
			return out, fmt.Errorf("%s %s: %w", f.Kind, f.Worker, waitErr)
		}
		return out, nil
	case PauseWorker:
		pid := servicePID(cfg, "worker-"+f.Worker)
		if pid == 0 {
			return "", fmt.Errorf("%s: worker %s does not run", f.Kind, f.Worker)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return "", fmt.Errorf("%s: SIGSTOP %d: %w", f.Kind, pid, err)
		}
		t := time.NewTimer(f.Pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		// Continued even when the soak is cancelled: a stopped worker
		// would outlive it.
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return "", fmt.Errorf("%s: SIGCONT %d: %w", f.Kind, pid, err)
		}
		return fmt.Sprintf("pid %d stopped for %.0fs", pid, f.Pause.Seconds()), nil
	}
	return "", fmt.Errorf("fault %q: allowed values are %s", f.Kind, joinAny(FaultKinds))
}

// servicePID is the pid of a running service of the stack, 0 if none.
func servicePID(cfg local.Config, name string) int {
	for _, s := range local.Status(cfg) {
		if s.Name == name && s.Running {
			return s.PID
		}
	}
	return 0
}

// awaitRecoveries polls until every job either recorded its recovery from
// the loss of worker (koala.checkpoint_events) or ended, and returns how
// many recovered.
func (d *driver) awaitRecoveries(ctx context.Context, jobs []string, worker string, since time.Time) (int, error) {
	deadline := time.Now().Add(recoveryWithin)
	for {
		recovered, settled := 0, 0
		var pending []string
		for _, id := range jobs {
			n, err := d.recoveriesOf(ctx, workflows.JobIDFor(id), "lost "+worker, since)
			if err == nil && n > 0 {
				recovered++
				settled++
				continue
			}
			if d.ended(ctx, id) {
				settled++
				continue
			}
			pending = append(pending, id)
		}
		if settled == len(jobs) {
			return recovered, nil
		}
		if time.Now().After(deadline) {
			return recovered, fmt.Errorf("%s after the kill, %s have not recovered", recoveryWithin, strings.Join(pending, ", "))
		}
		if err := pause(ctx, time.Second); err != nil {
			return recovered, err
		}
	}
}

// recoveriesOf counts job's recovery rows with detail since the time.
func (d *driver) recoveriesOf(ctx context.Context, job, detail string, since time.Time) (int, error) {
	rows, err := d.ch.CheckpointRows(ctx, job)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		if r.Kind == metrics.CheckpointKindRecovery && (detail == "" || r.Detail == detail) && !r.Time.Before(since.Add(-time.Second)) {
			n++
		}
	}
	return n, nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
