package activities

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/metrics"
	"koala/workflows/autoscale"
)

// rowsEvery records one row per task for every second of [from, to).
func rowsEvery(m *metrics.Memory, job string, tasks []string, from, to time.Time) {
	for at := from; at.Before(to); at = at.Add(time.Second) {
		for _, task := range tasks {
			m.RecordTask(metrics.TaskRow{Time: at.Add(100 * time.Millisecond), Job: job, Operator: "counter", Task: task,
				RecordsIn: 1000, RecordsOut: 1000, Batches: 10, BatchTimeAvgUs: 25_000})
		}
	}
}

func TestAutoscaleObserve(t *testing.T) {
	pol := autoscale.Policy{WindowSeconds: 4, StabilizationSeconds: 2}.WithDefaults()
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)

	t.Run("complete window", func(t *testing.T) {
		m := metrics.NewMemory()
		// Rows a little past now, so that the window is complete even if
		// a second begins before the activity reads the clock.
		rowsEvery(m, "j", []string{"counter-0", "counter-1"}, now.Add(-10*time.Second), now.Add(2*time.Second))
		a := &Autoscaler{Metrics: m, PollInterval: 10 * time.Millisecond, MaxWait: 5 * time.Second}
		end := now.Add(-2 * time.Second)
		obs, err := a.AutoscaleObserve(ctx, ObserveInput{JobID: "j", Policy: pol, NotBefore: end})
		if err != nil {
			t.Fatal(err)
		}
		// NotBefore in the past: the window ends now (the later of the two).
		if !obs.To.Equal(now) && !obs.To.Equal(now.Add(time.Second)) {
			t.Fatalf("window ends at %v, want now (%v)", obs.To, now)
		}
		c, ok := obs.Operator("counter")
		if !ok || c.Tasks != 2 || len(obs.Incomplete) != 0 {
			t.Fatalf("observation %+v", obs)
		}
		if c.TrueRate() != 4000 {
			t.Fatalf("true rate %v, want 1000 records per 0.25 s of batches", c.TrueRate())
		}
	})

	t.Run("the window starts after the stabilization", func(t *testing.T) {
		m := metrics.NewMemory()
		rowsEvery(m, "j", []string{"counter-0"}, now.Add(-10*time.Second), now.Add(2*time.Second))
		a := &Autoscaler{Metrics: m, PollInterval: 10 * time.Millisecond}
		change := now.Add(-3 * time.Second)
		obs, err := a.AutoscaleObserve(ctx, ObserveInput{JobID: "j", Policy: pol, NotBefore: now, LastChange: change})
		if err != nil {
			t.Fatal(err)
		}
		if want := change.Add(2 * time.Second); !obs.From.Equal(want) {
			t.Fatalf("window from %v, want %v (2 s after the change)", obs.From, want)
		}
	})

	t.Run("a task that has not reported is waited for, then named", func(t *testing.T) {
		m := metrics.NewMemory()
		end := now.Add(time.Second) // the window ends after the next second
		rowsEvery(m, "j", []string{"counter-0"}, now.Add(-10*time.Second), end)
		rowsEvery(m, "j", []string{"counter-1"}, now.Add(-10*time.Second), now.Add(-2*time.Second))
		a := &Autoscaler{Metrics: m, PollInterval: 10 * time.Millisecond, MaxWait: 300 * time.Millisecond}
		obs, err := a.AutoscaleObserve(ctx, ObserveInput{JobID: "j", Policy: pol, NotBefore: end})
		if err != nil {
			t.Fatal(err)
		}
		if len(obs.Incomplete) != 1 || obs.Incomplete[0] != "counter-1" {
			t.Fatalf("incomplete %v, want counter-1", obs.Incomplete)
		}
		if late := time.Since(end); late < 250*time.Millisecond {
			t.Fatalf("returned %v after the window's end, without waiting MaxWait for the missing task", late)
		}
	})

	t.Run("cancelled while waiting", func(t *testing.T) {
		a := &Autoscaler{Metrics: metrics.NewMemory(), PollInterval: 10 * time.Millisecond}
		cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_, err := a.AutoscaleObserve(cctx, ObserveInput{JobID: "j", Policy: pol, NotBefore: now.Add(time.Hour)})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the context's", err)
		}
	})

	t.Run("no metrics configured", func(t *testing.T) {
		obs, err := (&Autoscaler{}).AutoscaleObserve(ctx, ObserveInput{JobID: "j", Policy: pol})
		if err != nil || len(obs.Operators) != 0 {
			t.Fatalf("%+v %v", obs, err)
		}
	})
}

// fakeJobs answers with canned results.
type fakeJobs struct {
	state autoscale.JobState
	err   error
}

func (f fakeJobs) JobState(context.Context, string) (autoscale.JobState, error) {
	return f.state, f.err
}

func (f fakeJobs) Rescale(_ context.Context, _, _ string, c autoscale.Change) (RescaleOutcome, error) {
	if f.err != nil {
		return RescaleOutcome{}, f.err
	}
	return RescaleOutcome{WorkflowID: "job-reconfig-1", Parallelism: c.To}, nil
}

func TestAutoscaleJobControlErrors(t *testing.T) {
	ctx := context.Background()
	gone := fakeJobs{err: fmt.Errorf("job x not found: %w", ErrJobGone)}
	_, err := (&Autoscaler{Jobs: gone}).AutoscaleJobState(ctx, "x")
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypeJobGone || !appErr.NonRetryable() || appErr.Message() != "JobID (--job): job x not found: no job to autoscale" {
		t.Fatalf("a missing job: %v", err)
	}
	_, err = (&Autoscaler{Jobs: fakeJobs{err: errors.New("connection refused")}}).AutoscaleJobState(ctx, "x")
	if err == nil || errors.As(err, &appErr) {
		t.Fatalf("a transient error stays retryable: %v", err)
	}
	if _, err := (&Autoscaler{Jobs: gone}).AutoscaleRescale(ctx, RescaleInput{WorkflowID: "x"}); !errors.As(err, &appErr) || appErr.Type() != ErrTypeJobGone {
		t.Fatalf("rescale of a missing job: %v", err)
	}
	out, err := (&Autoscaler{Jobs: fakeJobs{}}).AutoscaleRescale(ctx, RescaleInput{WorkflowID: "x", Change: autoscale.Change{Operator: "counter", From: 1, To: 2}})
	if err != nil || out.Parallelism != 2 || out.WorkflowID != "job-reconfig-1" || out.Seconds <= 0 {
		t.Fatalf("rescale: %+v %v", out, err)
	}
}

type memLog struct{ rows []metrics.AutoscaleRow }

func (l *memLog) Record(_ context.Context, rows []metrics.AutoscaleRow) error {
	l.rows = append(l.rows, rows...)
	return nil
}

func TestAutoscaleRecord(t *testing.T) {
	d := autoscale.Decision{Seq: 3, At: time.Unix(100, 0), Estimates: []autoscale.Estimate{{Operator: "source", Current: 1, Target: 1}, {Operator: "counter", Current: 1, Target: 2}},
		Changes: []autoscale.Change{{Operator: "counter", From: 1, To: 2, Summary: "counter 1→2", Outcome: autoscale.OutcomeDone}}}
	log := &memLog{}
	if err := (&Autoscaler{Decisions: log}).AutoscaleRecord(context.Background(), RecordInput{JobID: "j", Autoscaler: "j-autoscaler", Decision: d}); err != nil {
		t.Fatal(err)
	}
	if len(log.rows) != 2 || log.rows[1].Action != autoscale.ActionScaleOut || log.rows[1].Autoscaler != "j-autoscaler" || log.rows[1].Seq != 3 {
		t.Fatalf("rows %+v", log.rows)
	}
	if err := (&Autoscaler{}).AutoscaleRecord(context.Background(), RecordInput{Decision: d}); err != nil {
		t.Fatalf("without a log: %v", err)
	}
}
