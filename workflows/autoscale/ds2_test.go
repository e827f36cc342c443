package autoscale

import (
	"testing"
	"time"
)

// testJob is source (1 task, 4 partitions) → counter (p tasks) → sink, 32
// buckets, lazy.
func testJob(p int) JobState {
	return JobState{
		JobID: "job-1", WorkflowID: "job-1", Status: StatusRunning, Protocol: "lazy", NumBuckets: 32, Partitions: 4, PerOperator: true,
		Operators: []Operator{
			{Name: "source", Kind: "kafka-source", Parallelism: 1, Source: true},
			{Name: "counter", Kind: "keyed-counter", Parallelism: p, Inputs: []string{"source"}},
			{Name: "sink", Kind: "collect-sink", Parallelism: 1, Inputs: []string{"counter"}, Sink: true},
		},
	}
}

var t0 = time.Unix(10_000, 0)

// window is a 10 s observation ending at t0+end seconds.
func window(end int, loads ...OperatorLoad) Observation {
	to := t0.Add(time.Duration(end) * time.Second)
	return Observation{From: to.Add(-10 * time.Second), To: to, Operators: loads}
}

// source reads `in` records per second; its lag goes from lag0 to lag1
// over the 10 s window.
func source(in, lag0, lag1 float64) OperatorLoad {
	return OperatorLoad{Operator: "source", Tasks: 1, RecordsIn: in, RecordsOut: in, Busy: in / 1e6, LagStart: lag0, LagEnd: lag1}
}

// op processes `in` records per second over `tasks` tasks that each take
// 1/rate seconds per record, emitting sel records per record.
func op(name string, tasks int, in, rate, sel float64) OperatorLoad {
	return OperatorLoad{Operator: name, Tasks: tasks, RecordsIn: in, RecordsOut: in * sel, Busy: in / rate}
}

func TestTargets(t *testing.T) {
	p := Policy{TargetUtilization: 0.7, CatchUpSeconds: 30}.WithDefaults()
	for _, tc := range []struct {
		name    string
		job     JobState
		pol     func(*Policy)
		obs     Observation
		want    map[string]int     // operator → target
		input   map[string]float64 // operator → rate to absorb
		capped  string             // counter's cap
		noData  []string
		rawWant float64 // counter's raw target, when checked
	}{
		{
			name: "steady: 2 tasks at 0.5 utilization keep 2",
			job:  testJob(2), obs: window(0, source(7000, 100, 100), op("counter", 2, 7000, 7000, 1), op("sink", 1, 7000, 1e6, 0)),
			want:  map[string]int{"source": 1, "counter": 2, "sink": 1},
			input: map[string]float64{"source": 7000 + 100.0/30, "counter": 7000 + 100.0/30},
		},
		{
			name: "input doubled: DS2 asks for twice the tasks",
			// 9800/s needs 2 tasks of 7000/s at 0.7; 19600/s needs 4.
			job: testJob(2), obs: window(0, source(19600, 0, 0), op("counter", 2, 14000, 7000, 1)),
			want: map[string]int{"counter": 4},
		},
		{
			name: "the issue's example: 30 K/s over tasks of 9.1 K/s at 0.7 → 5",
			job:  testJob(2), obs: window(0, source(30000, 0, 0), op("counter", 2, 18200, 9100, 1)),
			want: map[string]int{"counter": 5}, rawWant: 30000 / (9100 * 0.7),
		},
		{
			name: "an overloaded operator: the source reads less than arrives, the lag's growth and the lag count",
			// Arrival = 7000 + (33000-3000)/10 = 10000; catch-up 33000/30 = 1100.
			job: testJob(1), obs: window(0, source(7000, 3000, 33000), op("counter", 1, 7000, 7000, 1)),
			want: map[string]int{"counter": 3}, input: map[string]float64{"counter": 11100},
			rawWant: 11100 / (7000 * 0.7),
		},
		{
			name: "selectivity carries downstream",
			job: JobState{Status: StatusRunning, NumBuckets: 32, Partitions: 4, Operators: []Operator{
				{Name: "source", Parallelism: 1, Source: true},
				{Name: "split", Parallelism: 1, Inputs: []string{"source"}},
				{Name: "count", Parallelism: 1, Inputs: []string{"split"}},
			}},
			obs:   window(0, source(1000, 0, 0), op("split", 1, 1000, 100000, 3), op("count", 1, 3000, 1000, 1)),
			want:  map[string]int{"split": 1, "count": 5},
			input: map[string]float64{"count": 3000},
		},
		{
			name: "a join adds its inputs",
			job: JobState{Status: StatusRunning, NumBuckets: 32, Partitions: 4, Operators: []Operator{
				{Name: "join", Parallelism: 1, Inputs: []string{"a", "b"}}, // listed before its inputs
				{Name: "a", Parallelism: 1, Source: true},
				{Name: "b", Parallelism: 1, Source: true},
			}},
			obs: window(0, OperatorLoad{Operator: "a", Tasks: 1, RecordsIn: 1000, RecordsOut: 1000, Busy: 0.001},
				OperatorLoad{Operator: "b", Tasks: 1, RecordsIn: 400, RecordsOut: 400, Busy: 0.001}, op("join", 1, 1400, 1000, 1)),
			want:  map[string]int{"join": 2},
			input: map[string]float64{"join": 1400},
		},
		{
			name: "capped by NumBuckets",
			job:  testJob(2), obs: window(0, source(1e6, 0, 0), op("counter", 2, 14000, 7000, 1)),
			want: map[string]int{"counter": 32}, capped: "NumBuckets 32",
		},
		{
			name: "capped by MaxParallelism",
			job:  testJob(2), pol: func(p *Policy) { p.MaxParallelism = 3 },
			obs:  window(0, source(19600, 0, 0), op("counter", 2, 14000, 7000, 1)),
			want: map[string]int{"counter": 3}, capped: "MaxParallelism 3",
		},
		{
			name: "a source is capped by its partitions",
			// 50000/s at 10000/s per busy second would need 8 tasks.
			job: testJob(2), obs: window(0, OperatorLoad{Operator: "source", Tasks: 1, RecordsIn: 50000, RecordsOut: 50000, Busy: 5}, op("counter", 2, 50000, 1e6, 1)),
			want: map[string]int{"source": 4},
		},
		{
			name: "an idle operator scales to 1",
			job:  testJob(4), obs: window(0, source(0, 0, 0), OperatorLoad{Operator: "counter", Tasks: 4}),
			want: map[string]int{"counter": 1},
		},
		{
			name: "never busy: no data, the parallelism stays",
			job:  testJob(4), obs: window(0, source(100, 0, 0), OperatorLoad{Operator: "counter", Tasks: 4, RecordsIn: 100}),
			want: map[string]int{"counter": 0}, noData: []string{"counter", "sink"},
		},
		{
			name: "exactly at the boundary: 2.0 is 2",
			job:  testJob(2), obs: window(0, source(9800, 0, 0), op("counter", 2, 9800, 7000, 1)),
			want: map[string]int{"counter": 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := p
			if tc.pol != nil {
				tc.pol(&pol)
			}
			est := Targets(pol, tc.job, tc.obs)
			if len(est) != len(tc.job.Operators) {
				t.Fatalf("%d estimates for %d operators", len(est), len(tc.job.Operators))
			}
			for i, e := range est {
				if e.Operator != tc.job.Operators[i].Name {
					t.Fatalf("estimate %d is %s, want job order", i, e.Operator)
				}
			}
			byName := map[string]Estimate{}
			for _, e := range est {
				byName[e.Operator] = e
			}
			for name, want := range tc.want {
				if got := byName[name].Target; got != want {
					t.Errorf("%s: target %d, want %d (%+v)", name, got, want, byName[name])
				}
			}
			for name, want := range tc.input {
				if got := byName[name].Input; !near(got, want) {
					t.Errorf("%s: input %v, want %v", name, got, want)
				}
			}
			if tc.capped != byName["counter"].Capped && tc.capped != "" {
				t.Errorf("counter capped %q, want %q", byName["counter"].Capped, tc.capped)
			}
			if tc.rawWant != 0 && !near(byName["counter"].Raw, tc.rawWant) {
				t.Errorf("counter raw %v, want %v", byName["counter"].Raw, tc.rawWant)
			}
			for _, name := range tc.noData {
				if !byName[name].NoData {
					t.Errorf("%s: want NoData", name)
				}
			}
		})
	}
}

func TestSummaryAndRate(t *testing.T) {
	e := Estimate{TrueRate: 9100, Input: 30000}
	if got, want := Summary("counter", 2, 4, e), "counter 2→4: true rate 9.1 K/s/task, input 30 K/s"; got != want {
		t.Fatalf("Summary = %q, want %q", got, want)
	}
	for v, want := range map[float64]string{0: "0", 850.4: "850", 1000: "1 K", 4449: "4.4 K", 30500: "30.5 K", 123456: "123 K", 1.25e6: "1.2 M"} {
		if got := Rate(v); got != want {
			t.Errorf("Rate(%v) = %q, want %q", v, got, want)
		}
	}
}
