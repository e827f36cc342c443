package traces_test

import (
	"fmt"
	"testing"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/queries/traces"
)

// borgOracle is jobEventStats recomputed: per (job, event type) the last
// 10 events, "time,n,mean/max cpu,ram,disk" per event.
func borgOracle(in []traces.TaskEvent) []string {
	last := map[string][]traces.TaskEvent{}
	var want []string
	for _, e := range in {
		key := fmt.Sprintf("%d_%d", e.JobID, e.EventType)
		w := lastN(last[key], e, 10)
		last[key] = w
		var cpu, ram, disk []float64
		for _, x := range w {
			cpu, ram, disk = append(cpu, x.CPU), append(ram, x.RAM), append(disk, x.Disk)
		}
		want = append(want, fmt.Sprintf("%s=%d,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f", key, e.Time, len(w),
			meanOf(cpu), maxOf(cpu), meanOf(ram), maxOf(ram), meanOf(disk), maxOf(disk)))
	}
	return want
}

// borgRescale is the operator borg's rescale tests scale.
var borgRescale = rescale{op: "jobEventStats", par: map[string]int{"jobEventStats": 2}}

func borgInput(t testing.TB, n int) ([]dataplane.Record, []traces.TaskEvent) {
	g, err := traces.NewBorgGenerator(control.ProduceRequest{NumKeys: 40, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]traces.TaskEvent, n)
	for i := range events {
		events[i] = g.Event(int64(i))
	}
	return generate(t, traces.Borg, 40, 11, n), events
}

func TestBorgAcrossLazyRescale(t *testing.T) {
	recs, events := borgInput(t, 6000)
	res := runRescaled(t, traces.Borg, borgRescale, nil, recs)
	compare(t, res, borgOracle(events))
}

func TestBorgFromCSV(t *testing.T) {
	_, events := borgInput(t, 3000)
	good := make([][]byte, len(events))
	for i, e := range events {
		good[i] = e.CSV()
	}
	bad := []string{
		"600000000,,3418309,0,,0,u1,0,0,0.1,0.1,0.0001",     // 12 columns
		"600000000,,job,0,,0,u1,0,0,0.1,0.1,0.0001,0",       // job id not a number
		"600000000,,3418309,0,,9,u1,0,0,0.1,0.1,0.0001,0",   // event type out of range
		"600000000,,3418309,0,,1,u1,0,0,much,0.1,0.0001,0",  // cpu not a number
		",,3418309,0,,1,u1,0,0,0.1,0.1,0.0001,0",            // no time
		"600000000,,3418309,0,m7,1,u1,0,0,0.1,0.1,0.0001,0", // machine id not a number
	}
	recs := csvInput(t, traces.Borg, "", good, bad)
	recs, injected := injectBad(recs, []dataplane.Record{{Key: []byte("3418309_0"), Value: []byte("1,2,3")}})
	res := run(t, traces.Borg, map[string]int{"jobEventStats": 2}, nil, recs)
	if n := res.Counter("jobEventStats", "malformed_records"); n != uint64(injected) {
		t.Fatalf("jobEventStats counted %d malformed records, want %d", n, injected)
	}
	compare(t, res, borgOracle(events))
}

func BenchmarkBorg(b *testing.B) { benchQuery(b, traces.Borg, 1000, nil) }
