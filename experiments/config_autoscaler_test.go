package experiments

import (
	"reflect"
	"strings"
	"testing"

	_ "koala/queries"
	"koala/workflows"
	"koala/workflows/autoscale"
)

func TestConfigAutoscaler(t *testing.T) {
	in, err := ParseConfig("auto.json", []byte(`{"QueryName": "counter", "NumBuckets": 32,
		"Autoscaler": {"TargetUtilization": 0.6, "IntervalSeconds": 5, "MaxParallelism": 8, "Operators": ["counter"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := autoscale.DefaultPolicy()
	want.TargetUtilization, want.IntervalSeconds, want.MaxParallelism, want.Operators = 0.6, 5, 8, []string{"counter"}
	if in.Autoscaler == nil || !reflect.DeepEqual(*in.Autoscaler, want) {
		t.Fatalf("Autoscaler = %+v, want %+v", in.Autoscaler, want)
	}
	if in.ReconfigProtocol != workflows.ProtocolLazy {
		t.Fatalf("ReconfigProtocol %q: an autoscaled experiment defaults to lazy", in.ReconfigProtocol)
	}
	in, err = ParseConfig("auto.json", []byte(`{"QueryName": "counter", "ReconfigProtocol": "stop-and-restart", "Autoscaler": {}}`))
	if err != nil || in.ReconfigProtocol != workflows.ProtocolStopAndRestart || in.Autoscaler == nil || in.Autoscaler.TargetUtilization != 0.7 {
		t.Fatalf("an explicit protocol stays, an empty block takes the defaults: %+v %v", in, err)
	}
	if in, err := ParseConfig("plain.json", []byte(`{"QueryName": "counter"}`)); err != nil || in.Autoscaler != nil || in.ReconfigProtocol != workflows.ProtocolStopAndRestart {
		t.Fatalf("without the block: autoscaler %v, protocol %q, %v", in.Autoscaler, in.ReconfigProtocol, err)
	}
}

func TestConfigAutoscalerBadInput(t *testing.T) {
	for _, tc := range []struct {
		block string
		want  string
	}{
		{`{"TargetUtilisation": 0.7}`, `unknown field "TargetUtilisation" in Autoscaler (did you mean "TargetUtilization"?)`},
		{`{"TargetUtilization": 0}`, `Autoscaler.TargetUtilization (--target-utilization): 0 is outside (0, 1]`},
		{`{"TargetUtilization": 1.5}`, `Autoscaler.TargetUtilization (--target-utilization): 1.5 is outside (0, 1]`},
		{`{"TargetUtilization": "high"}`, `field "TargetUtilization" in Autoscaler: expected a number, got string`},
		{`{"MaxParallelism": 64}`, `Autoscaler.MaxParallelism (--max-parallelism): 64 is above NumBuckets (32)`},
		{`{"MinChange": 0}`, `Autoscaler.MinChange (--min-change): 0 must be ≥ 1 task`},
		{`{"Operators": ["countr"]}`, `Autoscaler.Operators (--operators): operator "countr" is not in query counter (operators: source, counter, sink)`},
		{`{"Protocol": "drrs"}`, `Autoscaler.Protocol (--protocol): "drrs", but ReconfigProtocol is "lazy"`},
		{`{"Protocol": "eager"}`, `field "Protocol" in Autoscaler: unknown value "eager"`},
		{`[1]`, `field "Autoscaler": expected an object of autoscaler settings`},
	} {
		_, err := ParseConfig("auto.json", []byte(`{"QueryName": "counter", "NumBuckets": 32, "Autoscaler": `+tc.block+`}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Autoscaler %s: error %v, want one containing %q", tc.block, err, tc.want)
		}
	}
}
