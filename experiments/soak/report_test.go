package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"koala/dataplane/metrics"
)

// TestReportTablesAndPlot: the final tables name every event with its
// outcome and every job's verdict, and the plot is written.
func TestReportTablesAndPlot(t *testing.T) {
	res := &Result{Seed: 7, Recoveries: 1}
	res.Events = []EventRecord{
		{Event: Event{Seq: 2, Fault: &Fault{Kind: RestartKafka}}, Start: 30 * time.Second, Took: 15 * time.Second, OK: true, Outcome: "pid 1 killed, 2 ready after 15.0s"},
		{Event: Event{Seq: 1, Reconfig: &Reconfig{Kind: ScaleOut, Query: QueryCounter, Targets: []Target{{"counter", 3}}}}, Start: 20 * time.Second, Took: time.Second, OK: true, Outcome: "counter 2→3 (lazy 1.0s)"},
		{Event: Event{Seq: 3, Reconfig: &Reconfig{Kind: TaskMigration, Query: QueryWindow, Targets: []Target{{"window", 2}}}}, Start: 40 * time.Second, Rejected: true, Outcome: "only worker"},
	}
	res.Checks = []Check{
		{Segment: 0, Protocol: LazyEventual, Query: QueryCounter, Inputs: 10, Expected: 10, Outputs: 10},
		{Segment: 0, Protocol: LazyEventual, Query: QueryJoin, Inputs: 10, Expected: 2, Outputs: 2, Reordered: -1, NA: "no order"},
	}
	res.samples = []sample{{Query: QueryCounter, Throughput: []metrics.Point{{Sec: 1, Value: 600}, {Sec: 2, Value: 610}}, Lag: []metrics.Point{{Sec: 1, Value: 40}}}}
	var b strings.Builder
	writeTables(&b, res)
	out := b.String()
	for _, want := range []string{
		"1  20s", "scale-out counter counter→3", "ok: counter 2→3",
		"restart-kafka", "rejected: only worker",
		"n/a", "reconfigurations 1 done, 1 rejected by the job, 0 failed", "faults  1 injected", "recoveries 1",
		"lost=0 duplicated=0 reordered=0 over 2 job(s): EXACT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "scale-out") > strings.Index(out, "restart-kafka") {
		t.Errorf("events are not in plan order:\n%s", out)
	}
	res.Checks[0].Lost, res.Checks[0].Late, res.Checks[1].Late = 1, 37, -1
	b.Reset()
	writeTables(&b, res)
	if !strings.Contains(b.String(), "lost=1 duplicated=0 reordered=0 over 2 job(s): NOT EXACT") {
		t.Errorf("a lost output is not reported:\n%s", b.String())
	}
	// The LATE column: records dropped as late, "?" when not known.
	if !strings.Contains(b.String(), "LATE") || !strings.Contains(b.String(), "  37  ") || !strings.Contains(b.String(), "  ?  ") {
		t.Errorf("late records are not reported:\n%s", b.String())
	}

	path := filepath.Join(t.TempDir(), "soak.png")
	if err := writePlot(path, res); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("plot %s: %v", path, err)
	}
}
