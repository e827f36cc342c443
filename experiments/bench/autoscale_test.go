package bench

import (
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/experiments"
	"koala/workflows"
)

// The autoscale config runs each row's protocol with the autoscaler on
// and no scheduled reconfiguration; its producers double their rate at
// AutoscaleStepSec and keep it past the 60 s window.
func TestAutoscaleInput(t *testing.T) {
	o := Options{AutoscaleConfig: "counter-autoscale.json", Kafka: []string{"k:9092"}}
	for _, spec := range AutoscaleRows {
		in, err := autoscaleInput(o, spec)
		if err != nil {
			t.Fatalf("%s: %v", spec.Name, err)
		}
		if in.ReconfigProtocol != spec.Protocol || in.Autoscaler == nil || in.Autoscaler.Protocol != "" || len(in.Reconfigurations) != 0 {
			t.Fatalf("%s: protocol %q, autoscaler %+v, reconfigurations %v", spec.Name, in.ReconfigProtocol, in.Autoscaler, in.Reconfigurations)
		}
		if in.TotalRuntimeSeconds < AutoscaleStepSec+AutoscaleWindowSec {
			t.Fatalf("%s: runs %d s, less than the step at %d s and the %d s window", spec.Name, in.TotalRuntimeSeconds, AutoscaleStepSec, AutoscaleWindowSec)
		}
		sched, err := produce.ParseRateLimiterConfig([]byte(in.Params["RateLimiterConfig"]))
		if err != nil {
			t.Fatalf("%s: schedule: %v", spec.Name, err)
		}
		perSec := func(k int64) int64 { r, _ := sched.RateAt(k); return r * 5 }
		if before, after := perSec(AutoscaleStepSec*5-1), perSec(AutoscaleStepSec*5); before != int64(in.Producer.RatePerSec) || after != 2*before {
			t.Fatalf("%s: %d ev/s before the step and %d after, want %d and twice that", spec.Name, before, after, in.Producer.RatePerSec)
		}
		if cost, err := control.SyntheticCost(control.JobSpec{Params: in.Params}, "counter"); err != nil || cost <= 0 {
			t.Fatalf("%s: the counter has no synthetic cost (%v, %v)", spec.Name, cost, err)
		}
		if !strings.HasSuffix(in.Name, spec.Name) || len(in.KafkaBrokers) == 0 {
			t.Fatalf("%s: name %q, brokers %v", spec.Name, in.Name, in.KafkaBrokers)
		}
	}
	if _, err := autoscaleInput(Options{AutoscaleConfig: "counter-steady.json"}, AutoscaleRows[0]); err == nil || !strings.Contains(err.Error(), "Autoscaler") {
		t.Fatalf("a config without an Autoscaler block: %v", err)
	}
}

// A run that was not measured is reported as such, with its reason, and
// never judged met; only the lazy row is judged.
func TestAutoscaleVerdicts(t *testing.T) {
	ok := AutoscaleRun{Row: RowAutoscaleLazy, Protocol: workflows.ProtocolLazy, Status: experiments.StatusOK, Changes: 1}
	ok.Figures.Seconds.Recovered, ok.Figures.Seconds.RecoveredSec = true, 12
	ok.Figures.Seconds.PreThroughput, ok.Figures.Seconds.MinThroughput = 1000, 950
	slow := ok
	slow.Figures.Seconds.RecoveredSec = 61
	dip := ok
	dip.Figures.Seconds.MinThroughput = 800
	never := ok
	never.Figures.Seconds.Recovered = false
	missing := AutoscaleRun{Row: RowAutoscaleLazy, Protocol: workflows.ProtocolLazy, Status: experiments.StatusFailed, Reason: "no ClickHouse"}
	for _, c := range []struct {
		name string
		run  AutoscaleRun
		want string
	}{{"met", ok, VerdictMet}, {"too slow", slow, VerdictMissed}, {"a dip", dip, VerdictMissed}, {"never back", never, VerdictMissed}, {"not measured", missing, VerdictUnknown}} {
		got := BenchReport{Autoscale: []AutoscaleRun{c.run}}.autoscaleTargets()
		if len(got) != 1 || got[0].Verdict != c.want {
			t.Errorf("%s: %+v, want verdict %s", c.name, got, c.want)
		}
		if c.want == VerdictUnknown && !strings.Contains(got[0].Measured, "no ClickHouse") {
			t.Errorf("%s: %q does not say why", c.name, got[0].Measured)
		}
	}
	sr := ok
	sr.Row, sr.Protocol = RowAutoscaleSR, workflows.ProtocolStopAndRestart
	if got := (BenchReport{Autoscale: []AutoscaleRun{sr}}).autoscaleTargets(); got[0].Verdict != VerdictUnknown {
		t.Errorf("stop-and-restart alone judged: %+v", got)
	}
	md := BenchReport{Autoscale: []AutoscaleRun{ok, missing}}.autoscaleMarkdown()
	if !strings.Contains(md, "not measured: no ClickHouse") || !strings.Contains(md, "back 12 s after the step") {
		t.Errorf("markdown:\n%s", md)
	}
}
