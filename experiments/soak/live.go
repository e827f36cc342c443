package soak

import (
	"context"
	"fmt"
	"koala/experiments/runner"
	"slices"
	"strings"
	"time"

	"koala/dataplane/metrics"
	"koala/workflows"
)

// sample is one query's throughput and lag series, in seconds of the soak.
type sample struct {
	Query           string
	Throughput, Lag []metrics.Point
}

// live prints a line every LiveEvery until ctx ends: elapsed, the
// reconfigurations done, failed and running, the faults, the recoveries,
// and the jobs' input throughput and Kafka lag in their last full second.
func (d *driver) live(ctx context.Context) {
	t := time.NewTicker(d.cfg.LiveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d.mu.Lock()
		jobs, seg := slices.Clone(d.jobs), d.seg
		running := make([]string, 0, len(d.running))
		for _, r := range d.running {
			running = append(running, r)
		}
		res := d.res
		d.mu.Unlock()
		slices.Sort(running)
		n := res.Counts()
		var tput, lag float64
		recoveries := res.Recoveries
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		for _, id := range jobs {
			job := workflows.JobIDFor(id)
			if pts, err := d.ch.Throughput(qctx, job, "source"); err == nil {
				tput += lastFull(pts)
			}
			if pts, err := d.ch.Lag(qctx, job); err == nil {
				lag += lastFull(pts)
			}
			if n, err := d.recoveriesOf(qctx, job, "", time.Time{}); err == nil {
				recoveries += n
			}
		}
		cancel()
		now := ""
		if len(running) > 0 {
			now = " | now: " + strings.Join(running, "; ")
		}
		fmt.Fprintf(d.cfg.Out, "[%s] segment %d %s | reconfigs %d done, %d rejected, %d failed | faults %d | recoveries %d | %.0f ev/s | lag %.0f%s\n",
			d.elapsed(), seg.Index, seg.Protocol, n.ReconfDone, n.ReconfRejected, n.ReconfFailed, n.Faults, recoveries, tput, lag, now)
	}
}

// lastFull is the value of the second before the last one reported (the
// last may still be filling).
func lastFull(pts []metrics.Point) float64 {
	switch len(pts) {
	case 0:
		return 0
	case 1:
		return pts[0].Value
	}
	return pts[len(pts)-2].Value
}

// collectSeries keeps a finished job's throughput and lag for the plot,
// moved onto the soak's clock.
func (d *driver) collectSeries(ctx context.Context, s JobSpec, startedAt time.Time) {
	job := workflows.JobIDFor(s.WorkflowID)
	start, err := d.ch.JobStart(ctx, job)
	if err != nil {
		start = startedAt
	}
	shift := start.Sub(d.begin).Seconds()
	move := func(pts []metrics.Point) []metrics.Point {
		out := make([]metrics.Point, len(pts))
		for i, p := range pts {
			out[i] = metrics.Point{Sec: p.Sec + shift, Value: p.Value}
		}
		return out
	}
	tp, _ := d.ch.Throughput(ctx, job, "source")
	lag, _ := d.ch.Lag(ctx, job)
	d.mu.Lock()
	d.res.samples = append(d.res.samples, sample{Query: s.Query, Throughput: move(tp), Lag: move(lag)})
	d.mu.Unlock()
}

// lateRecords is the records job's operators dropped as late, from the
// task metrics, and the seconds of the job (from its start) they were
// dropped in; -1 when the metrics cannot be read.
func (d *driver) lateRecords(ctx context.Context, workflowID string) (n int64, first, last float64) {
	pts, err := d.ch.ColumnSeries(ctx, workflows.JobIDFor(workflowID), "", "late_events", metrics.AggSum)
	if err != nil {
		return -1, 0, 0
	}
	for _, p := range pts {
		if p.Value <= 0 {
			continue
		}
		if n == 0 {
			first = p.Sec
		}
		n += int64(p.Value)
		last = p.Sec
	}
	return n, first, last
}

// startStateServer starts `koala statesvc` on a free port for the remote
// segments and returns how to stop it and its address.
func startStateServer(ctx context.Context, bin, runDir string) (func(), string, error) {
	if bin == "" {
		return nil, "", fmt.Errorf("protocol remote: no koala binary to run the state server (koala statesvc)")
	}
	svc, err := runner.StartStateServer(ctx, bin, "", runDir)
	if err != nil {
		return nil, "", err
	}
	return svc.Stop, svc.Addr, nil
}
