package dataplane

import (
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/wire"
)

func TestReadAheadOf(t *testing.T) {
	job := control.JobSpec{BatchSize: 500}
	r, err := ReadAheadOf(job)
	if err != nil || r.MaxInFlightRecords != control.DefaultSourceInFlightBatches*500 {
		t.Fatalf("default: %+v, %v; want %d batches of 500", r, err, control.DefaultSourceInFlightBatches)
	}
	job.Params = map[string]string{control.ParamSourceMaxInFlightRecords: "2000"}
	if r, err := ReadAheadOf(job); err != nil || r.MaxInFlightRecords != 2000 {
		t.Fatalf("set to 2000: %+v, %v", r, err)
	}
	for _, bad := range []string{"0", "-5", "16777217", "lots"} {
		job.Params[control.ParamSourceMaxInFlightRecords] = bad
		if _, err := ReadAheadOf(job); err == nil || !strings.Contains(err.Error(), control.ParamSourceMaxInFlightRecords) {
			t.Errorf("%s = %q: error %v, want one naming the parameter", control.ParamSourceMaxInFlightRecords, bad, err)
		}
	}
	if err := (ReadAhead{}).Validate(); err == nil || !strings.Contains(err.Error(), control.ParamSourceMaxInFlightRecords) {
		t.Errorf("zero bound: error %v, want one naming %s", err, control.ParamSourceMaxInFlightRecords)
	}
}

// sendBatch stands for one source batch: n records to each target (task
// id → operator), numbered and counted by c. It returns the batch number.
func sendBatch(t *testing.T, c *sourceCredit, n int, targets ...control.TaskRef) uint64 {
	t.Helper()
	var o outputs
	o.begin(&taskView{}, 0, "j", "source-0", n)
	for _, ref := range targets {
		for i := 0; i < n; i++ {
			o.emitTo(ref, Record{Offset: int64(i)})
		}
	}
	c.record(&o)
	seq := o.pending[targets[0].ID].Seq
	for _, id := range o.order {
		if f := o.pending[id]; f.Seq != seq || f.Kind != wire.FrameData {
			t.Fatalf("frame to %s: number %d, kind %v; want %d on a data frame like the batch's others", id, f.Seq, f.Kind, seq)
		}
	}
	return seq
}

// The account of a source's frames: per downstream operator, cumulative
// acknowledgements per receiving task, stale ones ignored, removed tasks
// forgotten.
func TestSourceCreditAccounting(t *testing.T) {
	c := newSourceCredit(ReadAhead{MaxInFlightRecords: 100})
	m0 := control.TaskRef{ID: "map-0", Operator: "map"}
	m1 := control.TaskRef{ID: "map-1", Operator: "map"}
	audit := control.TaskRef{ID: "audit-0", Operator: "audit"}
	check := func(what string, records, room int) {
		t.Helper()
		if got := c.records(); got != records {
			t.Fatalf("%s: %d records in flight, want %d", what, got, records)
		}
		if got := c.room(); got != room {
			t.Fatalf("%s: room %d, want %d", what, got, room)
		}
	}
	check("nothing sent", 0, 100)
	s1 := sendBatch(t, c, 10, m0, m1, audit) // map gets 20 records (10 per task), audit 10
	s2 := sendBatch(t, c, 15, m0, audit)     // map 35, audit 25
	s3 := sendBatch(t, c, 5, m1, audit)      // map 40, audit 30
	if s1 >= s2 || s2 >= s3 {
		t.Fatalf("batch numbers %d, %d, %d do not grow", s1, s2, s3)
	}
	check("three batches", 40, 60)
	if !c.ready(60) || c.ready(61) || c.ready(1000) {
		t.Fatalf("room 60 of 100: ready for 60 %v, 61 %v, 1000 %v; want true, false, false (a whole batch, or the whole bound)", c.ready(60), c.ready(61), c.ready(1000))
	}

	c.ack("map-0", s2) // map-0 took s1 and s2: map 40-10-15 = 15
	check("map-0 acknowledged up to the second batch", 30, 70)
	c.ack("audit-0", s3)
	check("audit caught up", 15, 85)
	c.ack("map-0", s1)   // stale: covered already
	c.ack("map-9", s3)   // no such receiver
	c.ack("map-1", s1-1) // from before this instance (a smaller number)
	check("stale and unknown acknowledgements", 15, 85)
	select {
	case <-c.wake:
	default:
		t.Fatal("no wake-up after acknowledgements freed credit")
	}

	// map-1 is removed by a reconfiguration before it acknowledged.
	c.prune(control.Deployment{Tasks: []control.TaskRef{m0, audit}})
	check("map-1 removed", 0, 100)
	if !c.ready(1000) {
		t.Fatal("nothing in flight: not ready for a batch larger than the bound")
	}
	c.ack("map-1", s3) // late acknowledgement of a forgotten task
	check("late acknowledgement of a removed task", 0, 100)

	cs := c.counters()
	if cs["source_in_flight_peak"] != 40 || cs["source_in_flight_limit"] != 100 || cs["source_in_flight"] != 0 {
		t.Fatalf("counters %v, want peak 40, limit 100, in flight 0", cs)
	}
}
