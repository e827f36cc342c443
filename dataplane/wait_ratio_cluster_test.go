package dataplane_test

import (
	"strconv"
	"testing"
	"time"

	"koala/activities"
	"koala/dataplane"
	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/workflows/wftest"
)

var waitRatioQuery = dataplane.NewQuery("test-wait-ratios").
	Source("source", 1).
	Process("pass", func(dataplane.OperatorContext) (dataplane.Operator, error) {
		return dataplane.OperatorFunc(func(in []dataplane.Record, emit dataplane.Emit) error {
			for _, r := range in {
				emit(r)
			}
			return nil
		}), nil
	}, false).Parallelism(2).
	RecordSink("sink")

// rowsOf are the metric rows of job's operator op with input.
func rowsOf(rec *metrics.Memory, job, op string) []metrics.TaskRow {
	var out []metrics.TaskRow
	for _, r := range rec.Tasks() {
		if r.Job == job && r.Operator == op && r.RecordsIn > 0 {
			out = append(out, r)
		}
	}
	return out
}

func waitRecords(n int) []dataplane.Record {
	out := make([]dataplane.Record, n)
	for i := range out {
		out[i] = dataplane.Record{Key: []byte(produce.KeyName(i % 97)), Value: []byte(strconv.Itoa(i))}
	}
	return out
}

// TestWorkersReportIdleRatio feeds a pass-through operator at a low rate
// (10 records every 200 ms): its tasks wait for input nearly all the
// time, so the rows in which they processed records must report an idle
// ratio well above 0 — the autoscaler's true rate depends on it.
func TestWorkersReportIdleRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	rec := metrics.NewMemory()
	run := wftest.Start(t, wftest.Options{Query: registerQuery(t, waitRatioQuery), Parallelism: map[string]int{"pass": 2}, Workers: 2, Recorder: rec})
	if err := run.Acts.StartTasks(run.Ctx, activities.TasksInput{Deployment: run.Dep}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	wait := run.ProduceAsync(waitRecords(n), 10, 200*time.Millisecond) // ~4 s
	wait()
	run.WaitFor("every record at the sink", func() bool { return len(run.Output()) >= n })
	run.WaitFor("rows of the pass tasks", func() bool { return len(rowsOf(rec, run.Job.JobID, "pass")) >= 4 })
	run.Finish()
	rows := rowsOf(rec, run.Job.JobID, "pass")
	low := 0
	for _, r := range rows {
		t.Logf("%s %s: in %d, idle %.3f, backpressure %.3f", r.Time.Format("15:04:05"), r.Task, r.RecordsIn, r.IdleRatio, r.BackpressureRatio)
		if r.IdleRatio < 0.5 {
			low++
		}
	}
	// A task's first second can start mid-interval; every other row of a
	// task that works a few milliseconds per second must be mostly idle.
	if low > 2 {
		t.Fatalf("%d of %d rows of tasks fed at a low rate report an idle ratio below 0.5", low, len(rows))
	}
}

// TestWorkersReportBackpressureRatio gives the operator after the source
// a synthetic cost (2 ms per record, control.ParamSyntheticCost) and
// 3000 records at once: the source reads ahead as far as its credit lets
// it and then waits for the downstream, so its rows must report a high
// backpressure ratio, while the costly tasks, never short of input,
// report a low idle ratio.
func TestWorkersReportBackpressureRatio(t *testing.T) {
	if testing.Short() {
		t.Skip("in-process cluster test")
	}
	rec := metrics.NewMemory()
	run := wftest.Start(t, wftest.Options{
		Query: registerQuery(t, waitRatioQuery), Parallelism: map[string]int{"pass": 2}, Workers: 2, Recorder: rec, BatchSize: 50,
		Params: map[string]string{control.ParamSyntheticCost: "pass=2ms", control.ParamSourceMaxInFlightRecords: "200"},
	})
	const n = 3000 // 3 s of work for two tasks at 2 ms per record
	run.Produce(waitRecords(n))
	started := time.Now()
	if err := run.Acts.StartTasks(run.Ctx, activities.TasksInput{Deployment: run.Dep}); err != nil {
		t.Fatal(err)
	}
	run.WaitFor("every record at the sink", func() bool { return len(run.Output()) >= n })
	if took := time.Since(started); took < 2*time.Second {
		t.Fatalf("%d records through two tasks costing 2 ms per record took %v, want at least 3 s", n, took)
	}
	run.Finish()
	var srcHigh, srcRows, passBusy, passRows int
	for _, r := range rowsOf(rec, run.Job.JobID, "source") {
		srcRows++
		if r.BackpressureRatio > 0.5 {
			srcHigh++
		}
	}
	for _, r := range rowsOf(rec, run.Job.JobID, "pass") {
		t.Logf("%s %s: in %d, batches %d × %.1f ms, idle %.3f", r.Time.Format("15:04:05"), r.Task, r.RecordsIn, r.Batches, r.BatchTimeAvgUs/1000, r.IdleRatio)
		passRows++
		if r.IdleRatio < 0.3 {
			passBusy++
		}
	}
	t.Logf("source: %d of %d rows with backpressure > 0.5; pass: %d of %d rows idle < 0.3", srcHigh, srcRows, passBusy, passRows)
	// The first and last second of a run are partial; the seconds between
	// are the source waiting for credit and the tasks working.
	if srcHigh < 1 || srcHigh < srcRows-2 {
		t.Fatalf("%d of %d source rows report a backpressure ratio above 0.5", srcHigh, srcRows)
	}
	if passBusy < 1 || passBusy < passRows-4 {
		t.Fatalf("%d of %d rows of the saturated tasks report an idle ratio below 0.3", passBusy, passRows)
	}
}
