package bench

import (
	"koala/experiments/runner"

	"math"
	"strings"
	"testing"
	"time"

	"koala/dataplane/metrics"
	"koala/experiments"
	"koala/experiments/internal/fixture"
)

const goBenchOut = `goos: linux
goarch: amd64
pkg: koala/dataplane
cpu: AMD EPYC
BenchmarkFrameEncode-2       	    4893	     47857 ns/op	2320.39 MB/s	        47.86 ns/record	       0 B/op	       0 allocs/op
BenchmarkOutputsBatching/targets=2-2         	    1153	    195683 ns/op	       195.7 ns/record	  184800 B/op	      22 allocs/op
PASS
ok  	koala/dataplane	2.227s
pkg: koala/statesvc
BenchmarkKLTLookup/hit/batch-2 	 50000	 21000 ns/op	 21.00 ns/key	 0 B/op	 0 allocs/op
BenchmarkKLTMemory-2 	 1	 900000000 ns/op	 5.000 B/key-counted	 14.00 B/key-heap	 6.000 B/key-heap-excl-key	 60.00 B/key-gomap
--- FAIL: BenchmarkBroken
`

func TestParseGoBench(t *testing.T) {
	rs := ParseGoBench(goBenchOut)
	if len(rs) != 4 {
		t.Fatalf("parsed %d results, want 4: %+v", len(rs), rs)
	}
	if rs[0].Name != "FrameEncode" || rs[0].Package != "koala/dataplane" || rs[0].N != 4893 || rs[0].Metrics["ns/op"] != 47857 || rs[0].Metrics["MB/s"] != 2320.39 {
		t.Errorf("first result: %+v", rs[0])
	}
	if rs[1].Name != "OutputsBatching/targets=2" {
		t.Errorf("sub-benchmark name: %q", rs[1].Name)
	}
	k, ok := FindMicro(rs, "KLTLookup/hit/batch")
	if !ok || k.Package != "koala/statesvc" || k.Metrics["ns/key"] != 21 {
		t.Errorf("KLT lookup: %+v %v", k, ok)
	}
}

func TestProcCPUTicks(t *testing.T) {
	stat := "1234 (koala worker) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 12 0 100 0 0"
	got, err := ProcCPUTicks(stat)
	if err != nil || got != 325 {
		t.Fatalf("ticks = %d, %v; want 325", got, err)
	}
	if _, err := ProcCPUTicks("garbage"); err == nil {
		t.Error("garbage parsed")
	}
}

func TestCPUAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := []CPUSample{{At: t0, Seconds: 10}, {At: t0.Add(time.Second), Seconds: 12}, {At: t0.Add(3 * time.Second), Seconds: 14}}
	for _, c := range []struct {
		at   time.Duration
		want float64
		ok   bool
	}{{0, 10, true}, {500 * time.Millisecond, 11, true}, {2 * time.Second, 13, true}, {4 * time.Second, 0, false}, {-time.Second, 0, false}} {
		got, ok := CPUAt(s, t0.Add(c.at))
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("at %v: %v %v, want %v %v", c.at, got, ok, c.want, c.ok)
		}
	}
}

func TestComputeSteady(t *testing.T) {
	start := time.Unix(2000, 0)
	var sink []metrics.Point
	for s := 0; s < 20; s++ {
		sink = append(sink, metrics.Point{Sec: float64(s), Value: 1000})
	}
	cpu := []CPUSample{{At: start, Seconds: 0, MachineBusy: 0}, {At: start.Add(20 * time.Second), Seconds: 10, MachineBusy: 30}} // 0.5 cores
	in := SteadyInputs{
		Sink: sink, JobStart: start, CPU: cpu, From: 5, To: 15, TargetRate: 1000,
		// 60 batches of 200 µs, 38 of 300 µs, 2 of 5 ms in the window on
		// two tasks; a 9 s batch after it.
		Batches: []metrics.BatchHistSample{
			{Task: "m-0", Sec: 6, Hist: fixture.BatchHist(t, 60, 200*time.Microsecond)},
			{Task: "m-1", Sec: 7, Hist: fixture.BatchHist(t, 38, 300*time.Microsecond)},
			{Task: "m-0", Sec: 8, Hist: fixture.BatchHist(t, 2, 5*time.Millisecond)},
			{Task: "m-0", Sec: 30, Hist: fixture.BatchHist(t, 1, 9*time.Second)},
		},
	}
	s := ComputeSteady(Steady{Query: "hello"}, in)
	if s.SinkEvents != 10000 || s.EventsPerSec != 1000 || math.Abs(s.CPUSeconds-5) > 1e-9 || math.Abs(s.CoresUsed-0.5) > 1e-9 || math.Abs(s.MachineCores-1.5) > 1e-9 {
		t.Fatalf("steady: %+v", s)
	}
	if math.Abs(s.EventsPerCPUSec-2000) > 1e-6 || s.SustainedRatio != 1 {
		t.Errorf("per CPU-s %v, sustained %v", s.EventsPerCPUSec, s.SustainedRatio)
	}
	if s.BatchP50Us != 200 || math.Abs(s.BatchP99Us-5000) > 5 || math.Abs(s.BatchMaxUs-5000) > 5 || s.BatchCount != 100 || s.BatchError != "" {
		t.Errorf("batch p50 %v p99 %v max %v n %d err %q", s.BatchP50Us, s.BatchP99Us, s.BatchMaxUs, s.BatchCount, s.BatchError)
	}
	if s.ProducerCPUSeconds != 0 || s.producerText() != "in worker CPU" {
		t.Errorf("producers in the task workers: producer CPU %v, cell %q", s.ProducerCPUSeconds, s.producerText())
	}
	in.Batches = append(in.Batches, metrics.BatchHistSample{Task: "m-1", Sec: 9, Hist: "garbage"})
	if s := ComputeSteady(Steady{Query: "hello"}, in); s.BatchError == "" || s.BatchCount != 0 {
		t.Errorf("an undecodable histogram row: count %d, error %q", s.BatchCount, s.BatchError)
	}
}

func TestBenchReportTargets(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	r := BenchReport{
		Micro: ParseGoBench(goBenchOut),
		Steady: []Steady{
			{Row: RowHello, Query: "hello", Status: experiments.StatusOK, EventsPerCPUSec: 600_000, EventsPerSec: 50_000, CoresUsed: 0.1, Target: TargetStatelessPerCore},
			{Row: RowCounter, Query: "counter", Status: experiments.StatusOK, EventsPerCPUSec: 100_000, EventsPerSec: 20_000, CoresUsed: 0.2, Target: TargetKeyedPerCore},
		},
		Disruption: &experiments.Comparison{Config: "c.json", Rows: []experiments.CompareRow{
			{Protocol: experiments.VariantLazy, Status: experiments.StatusOK, RunMetrics: experiments.RunMetrics{PreThroughput: f(100), MinThroughput: f(95), MinRatio: f(0.95), PeakBatchUs: f(4000), PreBatchP99Us: f(1000), LagRecoverySec: f(1)}},
			{Protocol: experiments.VariantStopAndRestart, Status: experiments.StatusOK, RunMetrics: experiments.RunMetrics{LagRecoverySec: f(10)}},
		}},
	}
	want := map[string]string{
		"q1 / stateless":    VerdictMet,
		"counter on Pebble": VerdictMissed,
		"over 10 M keys":    VerdictUnknown, // the row did not run
		"min 1 s":           VerdictMet,
		"p99 batch":         VerdictMissed,
		"lag recovery":      VerdictMet,
		"KLT lookup ≤ 40":   VerdictMet,
		"KLT lookup share":  VerdictUnknown, // no BenchmarkStatefulBatchKLTShare in the output
		"KLT size":          VerdictMissed,
	}
	got := r.Targets()
	for key, v := range want {
		found := false
		for _, row := range got {
			if strings.Contains(row.Target, key) {
				found = true
				if row.Verdict != v {
					t.Errorf("%s: verdict %s, want %s (%s)", key, row.Verdict, v, row.Measured)
				}
			}
		}
		if !found {
			t.Errorf("no target row for %q", key)
		}
	}
	markdownHas(t, r.Markdown(), "## Targets", "| hello |", "KLTLookup/hit/batch", "MISSED")
}

// TestBatchTargetPrefersHistograms: with HDR batch percentiles the p99
// batch target compares the p99 around the reconfiguration with the
// pre-scale p99 (here 2.5 ×, met) instead of the per-second maxima (4 ×).
func TestBatchTargetPrefersHistograms(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	lazy := experiments.RunMetrics{PeakBatchUs: f(4000), PreBatchP99Us: f(1000),
		PreBatch:      &metrics.BatchPercentiles{Count: 900, P50Us: 300, P99Us: 1000, MaxUs: 1500},
		ReconfigBatch: &metrics.BatchPercentiles{Count: 200, P50Us: 400, P99Us: 2500, MaxUs: 4000}}
	r := BenchReport{Disruption: &experiments.Comparison{Rows: []experiments.CompareRow{{Protocol: experiments.VariantLazy, Status: experiments.StatusOK, RunMetrics: lazy}}}}
	var row TargetRow
	for _, tr := range r.Targets() {
		if strings.Contains(tr.Target, "p99 batch") {
			row = tr
		}
	}
	if row.Verdict != VerdictMet || !strings.Contains(row.Measured, "2.50 ×") || !strings.Contains(row.Measured, "HDR") {
		t.Fatalf("p99 batch target: %+v", row)
	}
	markdownHas(t, r.Markdown(), "pre batch p50/p99", "0.3 / 1.0 ms", "0.4 / 2.5 ms", "peak per-s batch max")
}

func TestParseMachineBusy(t *testing.T) {
	got, err := ParseMachineBusy("cpu  100 5 50 1000 20 3 2 10 0 0\ncpu0 1 2 3 4 5 6 7 8\n")
	if err != nil || math.Abs(got-1.7) > 1e-9 {
		t.Fatalf("busy = %v, %v; want 1.7", got, err)
	}
}

// TestMeasureExchange runs the gRPC exchange ceiling briefly: it must count
// whole frames received, and report no error (which it does when a record
// sent did not arrive).
func TestMeasureExchange(t *testing.T) {
	c := MeasureExchange(300 * time.Millisecond)
	if c.Error != "" {
		t.Fatalf("error: %s", c.Error)
	}
	if c.Component != CeilExchange || c.Events <= 0 || c.Events%1000 != 0 || c.Seconds < 0.3 || c.EventsPerSec <= 0 {
		t.Fatalf("ceiling %+v", c)
	}
}

// TestSteadyProducerCPUApart: the producer worker's CPU is measured over
// the same window, kept out of the pipeline's CPU-s and shown in the table
// and the text.
func TestSteadyProducerCPUApart(t *testing.T) {
	start := time.Unix(2000, 0)
	var sink []metrics.Point
	for s := 0; s < 20; s++ {
		sink = append(sink, metrics.Point{Sec: float64(s), Value: 1000})
	}
	// Task workers 0.5 cores, producer worker 0.25 cores.
	cpu := []CPUSample{{At: start}, {At: start.Add(20 * time.Second), Seconds: 10, Producer: 5, MachineBusy: 30}}
	s := ComputeSteady(Steady{Row: RowHelloTuned, Query: "hello", Status: experiments.StatusOK, ProducerWorkers: []string{"w3"}, TaskPlacement: "co-locate", Tuned: tunedFetchColocate},
		SteadyInputs{Sink: sink, JobStart: start, CPU: cpu, From: 5, To: 15, TargetRate: 1000})
	if math.Abs(s.CPUSeconds-5) > 1e-9 || math.Abs(s.EventsPerCPUSec-2000) > 1e-6 {
		t.Fatalf("pipeline CPU %v, per CPU-s %v; want 5 and 2000", s.CPUSeconds, s.EventsPerCPUSec)
	}
	if math.Abs(s.ProducerCPUSeconds-2.5) > 1e-9 || math.Abs(s.ProducerCores-0.25) > 1e-9 {
		t.Fatalf("producer CPU %v (%v cores), want 2.5 (0.25)", s.ProducerCPUSeconds, s.ProducerCores)
	}
	if got := s.perCPUWithProducers(); math.Abs(got-10000/7.5) > 1e-6 {
		t.Errorf("with producers %v ev/s per CPU-s, want %v", got, 10000/7.5)
	}
	md := BenchReport{Steady: []Steady{s}}.Markdown()
	for _, want := range []string{"| producer cores |", "| 0.25 (w3) |", "| co-locate |", "| — (tuned: co-located, 1 MB fetches) |",
		"Producers on w3: 2.5 CPU-s (0.25 cores) over the window, not in the worker CPU-s; with them the pipeline and its input generator took 1333 ev per CPU-s."} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// TestCollapseMicro merges repeated runs of a benchmark into medians and
// leaves single runs alone.
func TestCollapseMicro(t *testing.T) {
	out := `pkg: koala/statesvc
BenchmarkKLTLookup/hit/batch-2 	 50000	 30000 ns/op	 30.00 ns/key
BenchmarkKLTMemory-2 	 1	 2554236862 ns/op	 3.2 B/key-heap
BenchmarkKLTLookup/hit/batch-2 	 40000	 90000 ns/op	 90.00 ns/key
BenchmarkKLTLookup/hit/batch-2 	 45000	 35000 ns/op	 35.00 ns/key
`
	rs := CollapseMicro(ParseGoBench(out))
	if len(rs) != 2 || rs[0].Name != "KLTLookup/hit/batch" || rs[1].Name != "KLTMemory" {
		t.Fatalf("collapsed to %+v", rs)
	}
	m := rs[0]
	want := map[string]float64{"ns/op": 35000, "ns/key": 35, "runs": 3, "ns/op-min": 30000, "ns/op-max": 90000}
	for unit, v := range want {
		if m.Metrics[unit] != v {
			t.Errorf("%s = %v, want %v", unit, m.Metrics[unit], v)
		}
	}
	if m.N != 135000 {
		t.Errorf("N = %d, want 135000", m.N)
	}
	if _, ok := rs[1].Metrics["runs"]; ok {
		t.Errorf("single run got a runs metric: %v", rs[1].Metrics)
	}
	if got := runsText(m); got != ", median of 3 runs, 30.0–90.0" {
		t.Errorf("runsText = %q", got)
	}
	if median([]float64{4, 1, 3, 2}) != 2.5 {
		t.Error("median of an even count is not the mean of the middle two")
	}
}

// TestBenchReportKLTNeedsMiss: the KLT lookup target holds only if the
// batches of absent keys make it too, not those of present keys alone.
func TestBenchReportKLTNeedsMiss(t *testing.T) {
	for _, c := range []struct {
		missNs float64
		want   string
	}{{30_000, VerdictMet}, {45_000, VerdictMissed}} {
		r := BenchReport{Micro: []MicroResult{
			{Package: "koala/statesvc", Name: "KLTLookup/hit/batch", Metrics: map[string]float64{"ns/op": 21_000}},
			{Package: "koala/statesvc", Name: "KLTLookup/miss/batch", Metrics: map[string]float64{"ns/op": c.missNs}},
		}}
		found := false
		for _, row := range r.Targets() {
			if strings.Contains(row.Target, "KLT lookup ≤ 40") {
				found = true
				if row.Verdict != c.want {
					t.Errorf("miss %.0f ns: verdict %s, want %s (%s)", c.missNs, row.Verdict, c.want, row.Measured)
				}
			}
		}
		if !found {
			t.Fatal("no KLT lookup row")
		}
	}
}

// The KLT share row reads klt-pct-of-batch of BenchmarkStatefulBatchKLTShare
// (the largest of its sub-benchmarks) and is not measured without it.
func TestBenchReportKLTShare(t *testing.T) {
	out := `pkg: koala/dataplane
BenchmarkStatefulBatchKLTShare/hit-2 	 1000	 900000 ns/op	 27000 klt-ns/batch	 2.500 klt-pct-of-batch
BenchmarkStatefulBatchKLTShare/miss-2 	 1000	 950000 ns/op	 28000 klt-ns/batch	 %s klt-pct-of-batch
`
	for _, c := range []struct {
		micro, want, measured string
	}{
		{strings.Replace(out, "%s", "2.900", 1), VerdictMet, "2.90 %"},
		{strings.Replace(out, "%s", "3.100", 1), VerdictMissed, "3.10 %"},
		{"pkg: koala/dataplane\nBenchmarkStatefulBatchKLTShare-2 	 1000	 900000 ns/op\n", VerdictUnknown, "n/a"},
		{"", VerdictUnknown, "n/a"},
	} {
		r := BenchReport{Micro: CollapseMicro(ParseGoBench(c.micro))}
		found := false
		for _, row := range r.Targets() {
			if row.Target != "KLT lookup share of batch ≤ 3 %" {
				continue
			}
			found = true
			if row.Verdict != c.want || !strings.Contains(row.Measured, c.measured) {
				t.Errorf("%q: %s %q, want %s containing %q", c.micro, row.Verdict, row.Measured, c.want, c.measured)
			}
		}
		if !found {
			t.Fatalf("no KLT share row in %+v", r.Targets())
		}
	}
}

// markdownHas fails t for each of want that md lacks.
func markdownHas(t *testing.T, md string, want ...string) {
	t.Helper()
	for _, s := range want {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q", s)
		}
	}
}

// The large-state rows have their own section: the warm-up that built
// each row's state, and a verdict cell that says why a row whose state did
// not prove itself is not measured.
func TestMarkdownLargeState(t *testing.T) {
	good := q6Run()
	good.WorkflowID = "q6mod-large-1task-s"
	good.WarmUp = &WarmUpRun{Config: "experiments/bench/q6mod-warmup-1task.json", WorkflowID: "q6mod-warmup-1task-s", Events: 1_000_000, Keys: 1_000_000, Bytes: 2_190_000_000, Seconds: 71}
	small := q6Run()
	small.Row, small.State.DiskBytes = RowQ6Two, 1.2e9
	failed := Steady{Row: RowQ6Two, Phase: PhaseLargeState, Query: "nexmark_query6_modified", Status: experiments.StatusFailed, Reason: "warm-up: run exceeded its time limit"}
	md := BenchReport{Steady: []Steady{q1Run(), good, small, failed}}.Markdown()
	steady, large, ok := strings.Cut(md, "## Large state (q6* over ≥ 2 GB)")
	if !ok {
		t.Fatalf("no large-state section:\n%s", md)
	}
	if strings.Contains(steady, "| q6-1task |") || !strings.Contains(steady, "| q1-1src | nexmark-q1 | round robin, 1 source + 1 q1-currency | 64 KiB / 25 ms |") {
		t.Errorf("steady section holds the wrong rows:\n%s", steady)
	}
	markdownHas(t, large,
		"| q6-1task | nexmark_query6_modified | round robin, 1 source + 1 statefulMapper | 64 KiB / 25 ms | 2.20 GB on disk at the window's start, value caches 33.6 MB, hit rate 1.0 % of 860000 lookups | 27000 |",
		"| yes (+500) |", "| 22000 | 20000 | met |",
		"| not measured: 1.20 GB of state on disk at the window's start, under the 2.00 GB the row needs |",
		"State built by `experiments/bench/q6mod-warmup-1task.json` (workflow `q6mod-warmup-1task-s`): 1000000 records, 1000000 keys, 2.19 GB of checkpoint, in 71 s.",
		"| q6-2tasks | nexmark_query6_modified | failed: warm-up: run exceeded its time limit |")
}

// The report names the probed rate and the share the protocols ran at.
func TestProbeReport(t *testing.T) {
	md := BenchReport{Probe: &runner.RateProbe{Config: "c.json", WorkflowID: "wf", StepSec: 6, Sustainable: 30_000, Limit: "lag grew at 40000 ev/s", RunRate: 21_000,
		Steps: []runner.ProbeStep{{Rate: 30_000, FromSec: 20, ToSec: 24, Counted: 29_900, LagGrowth: 120, Verdict: runner.StepSustained}}}}.Markdown()
	markdownHas(t, md, "Probed sustainable rate **30000 ev/s** (lag grew at 40000 ev/s); the protocols ran at 70 % of it, **21000 ev/s**", "| 30000 | [20 s, 24 s) | 29900 | +120 | sustained |")
}
