package runner

import (
	"reflect"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/dataplane/produce"
	"koala/workflows"
)

func TestProbeRates(t *testing.T) {
	got, err := ProbeRates(10_000, 1.3, 160_000)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{10_000, 13_000, 16_900, 22_000, 28_600, 37_100, 48_300, 62_700, 81_600, 106_000, 137_900}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rates %v, want %v", got, want)
	}
	for _, bad := range [][3]float64{{0, 1.3, 100}, {100, 1, 1000}, {1000, 1.5, 500}} {
		if _, err := ProbeRates(int(bad[0]), bad[1], int(bad[2])); err == nil {
			t.Errorf("ProbeRates%v: no error", bad)
		}
	}
}

// The schedule is what the producers read, per producer and 200 ms
// interval, and the rates it reports are what it really offers.
func TestProbeSchedule(t *testing.T) {
	sched, offered, err := probeSchedule([]int{10_000, 13_001}, 2, 6)
	if err != nil {
		t.Fatal(err)
	}
	s, err := produce.ParseRateLimiterConfig([]byte(sched))
	if err != nil {
		t.Fatalf("producers cannot read %s: %v", sched, err)
	}
	if !reflect.DeepEqual(s.RateLimit, []int64{1000, 1300}) || !reflect.DeepEqual(s.RateChangeInterval, []int64{30, 30}) {
		t.Errorf("schedule %+v", s)
	}
	if !reflect.DeepEqual(offered, []int{10_000, 13_000}) {
		t.Errorf("offered %v", offered)
	}
}

// probeSeries makes per-second lag and sink series for steps of stepSec
// starting at offset: lagPerSec[i] is how fast the lag grows in step i,
// share[i] the share of its rate the sink counts; noise alternates ±noise.
func probeSeries(rates []int, stepSec int, offset float64, lagPerSec, share []float64, noise float64) (lag, sink []metrics.Point) {
	l := 2000.0
	for sec := 0; sec < int(offset)+len(rates)*stepSec+2; sec++ {
		i := (sec - int(offset)) / stepSec
		if sec < int(offset) || i >= len(rates) {
			lag = append(lag, metrics.Point{Sec: float64(sec), Value: l})
			continue
		}
		l += lagPerSec[i]
		n := noise
		if sec%2 == 0 {
			n = -noise
		}
		lag = append(lag, metrics.Point{Sec: float64(sec), Value: l + n})
		sink = append(sink, metrics.Point{Sec: float64(sec), Value: share[i] * float64(rates[i])})
	}
	return lag, sink
}

func TestAnalyzeProbe(t *testing.T) {
	rates := []int{10_000, 20_000, 30_000, 40_000}
	for _, c := range []struct {
		name        string
		lagPerSec   []float64
		share       []float64
		noise       float64
		sustainable int
		limit       string
		verdicts    []string
	}{
		{"lag grows at the top step", []float64{0, 0, 0, 8000}, []float64{1, 1, 1, 0.8}, 1500, 30_000, "lag grew at 40000 ev/s",
			[]string{StepSustained, StepSustained, StepSustained, StepLagGrew}},
		// Noise of a few batches around a flat lag is not growth.
		{"noisy but flat", []float64{0, 0, 0, 0}, []float64{1, 1, 1, 1}, 2000, 40_000, "every step up to the top, 40000 ev/s, was sustained: the limit is higher",
			[]string{StepSustained, StepSustained, StepSustained, StepSustained}},
		{"producers fall short", []float64{0, 0, 0, 0}, []float64{1, 0.7, 0.7, 0.7}, 0, 10_000, "producers fell short at 20000 ev/s and at 30000 ev/s",
			[]string{StepSustained, StepProducerBound, StepProducerBound}},
		{"overloaded from the start", []float64{5000, 9000, 9000, 9000}, []float64{0.5, 0.5, 0.5, 0.5}, 0, 0, "lag grew at 10000 ev/s and at 20000 ev/s",
			[]string{StepLagGrew, StepLagGrew}},
		// A lone step that fell behind, the next one keeping up (its lag
		// falling back): a hiccup, not the limit.
		{"a hiccup is passed over", []float64{0, 8000, -8000, 0}, []float64{1, 0.8, 1.2, 1}, 0, 40_000,
			"every step up to the top, 40000 ev/s, was sustained: the limit is higher; passed over a lone step at 20000 ev/s that fell behind (the next step kept up)",
			[]string{StepSustained, StepLagGrew, StepSustained, StepSustained}},
		{"a hiccup, then the limit", []float64{8000, 0, 8000, 9000}, []float64{0.8, 1, 0.8, 0.8}, 0, 20_000,
			"lag grew at 30000 ev/s and at 40000 ev/s; passed over a lone step at 10000 ev/s that fell behind (the next step kept up)",
			[]string{StepLagGrew, StepSustained, StepLagGrew, StepLagGrew}},
		// The top step falling behind has no next step to pass it over.
		{"the top step alone", []float64{0, 0, 0, 8000}, []float64{1, 1, 1, 0.8}, 0, 30_000, "lag grew at 40000 ev/s",
			[]string{StepSustained, StepSustained, StepSustained, StepLagGrew}},
	} {
		lag, sink := probeSeries(rates, 6, 3.4, c.lagPerSec, c.share, c.noise)
		p := AnalyzeProbe(rates, 6, 1000, 3.4, lag, sink)
		var verdicts []string
		for _, st := range p.Steps {
			verdicts = append(verdicts, st.Verdict)
		}
		if p.Sustainable != c.sustainable || p.Limit != c.limit || !reflect.DeepEqual(verdicts, c.verdicts) {
			t.Errorf("%s: sustainable %d, limit %q, steps %v; want %d, %q, %v", c.name, p.Sustainable, p.Limit, verdicts, c.sustainable, c.limit, c.verdicts)
		}
		// Steps skip their first seconds: step 0 of a run starting at 3.4 s
		// is measured over [5 s, 9 s).
		if p.Steps[0].FromSec != 5 || p.Steps[0].ToSec != 9 {
			t.Errorf("%s: first step measured over [%v, %v)", c.name, p.Steps[0].FromSec, p.Steps[0].ToSec)
		}
	}
}

// The protocols run at share × the probed rate, or at the config's when
// the probe found none, saying so.
func TestProbeRunRate(t *testing.T) {
	p := RateProbe{Sustainable: 30_000, Limit: "lag grew at 40000 ev/s"}
	p.SetRunRate(0.7, 10_000)
	if p.RunRate != 21_000 || p.Error != "" || p.Share != 0.7 {
		t.Errorf("probed 30000: run rate %d, share %v, error %q", p.RunRate, p.Share, p.Error)
	}
	p.SetRunRate(1.3, 10_000)
	if p.RunRate != 39_000 {
		t.Errorf("probed 30000 × 1.3: run rate %d", p.RunRate)
	}
	none := AnalyzeProbe([]int{10_000}, 6, 1000, 0, nil, nil)
	none.SetRunRate(0.7, 10_000)
	if none.RunRate != 10_000 || !strings.Contains(none.Error, "no step was sustained (no lag data at 10000 ev/s): start the staircase lower") {
		t.Errorf("no data: run rate %d, error %q", none.RunRate, none.Error)
	}
}

// Bad overload options are refused before anything runs, naming the flag.
func TestValidateOverload(t *testing.T) {
	ok := CompareOptions{Overload: 1.3, ProbeFrom: 2000, ProbeFactor: 1.15, ProbeMax: 60000, ProbeStepSec: 8}
	if rates, err := ok.validateOverload(); err != nil || len(rates) == 0 || rates[0] != 2000 {
		t.Fatalf("valid options: rates %v, error %v", rates, err)
	}
	if rates, err := (CompareOptions{}).validateOverload(); err != nil || rates != nil {
		t.Errorf("no overload: rates %v, error %v", rates, err)
	}
	for _, c := range []struct {
		mod  func(*CompareOptions)
		want string
	}{
		{func(o *CompareOptions) { o.Overload = 0.5 }, "--overload 0.5"},
		{func(o *CompareOptions) { o.Overload = 4 }, "--overload 4"},
		{func(o *CompareOptions) { o.ProbeStepSec = 2 }, "--probe-step 2"},
		{func(o *CompareOptions) { o.ProbeFactor = 1 }, "--probe-factor"},
		{func(o *CompareOptions) { o.ProbeMax = 100 }, "--probe-max"},
	} {
		o := ok
		c.mod(&o)
		if _, err := o.validateOverload(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one naming %s", o, err, c.want)
		}
	}
}

// A probe counts the sink's records, unless the sink does not get every
// input record (q3's join results): then the source's.
func TestProbeCountOperator(t *testing.T) {
	res := workflows.ExperimentResult{Final: control.Deployment{Job: control.JobSpec{Operators: []control.OperatorSpec{{Name: "source"}, {Name: "q3-join"}, {Name: "sink"}}}}}
	if op, at := probeCountOperator(res); op != "sink" || at != "sink" {
		t.Errorf("every record reaches the sink: counted %q (%s), want the sink", op, at)
	}
	res.ExactnessUnchecked = "Nexmark q3 filters, joins or aggregates"
	if op, at := probeCountOperator(res); op != "source" || at != "source" {
		t.Errorf("q3: counted %q (%s), want the source", op, at)
	}
}
