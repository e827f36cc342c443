package queries

import (
	"fmt"
	"slices"
	"strings"

	"koala/dataplane/control"
)

// Values of ParamSinkKind.
const (
	SinkKindDefault = "default"
	SinkKindKafka   = "kafka"
)

// SinkKinds lists the allowed values of ParamSinkKind.
var SinkKinds = []string{SinkKindDefault, SinkKindKafka}

// runtimeSinks are the sink kinds ParamSinkKind may replace.
var runtimeSinks = []string{control.KindCollectSink, control.KindCountSink, control.KindRecordSink}

// withSinkKind returns ops with their terminal runtime sinks replaced as
// params' SinkKind asks ("" is the default).
func withSinkKind(query string, ops []control.OperatorSpec, params map[string]string) ([]control.OperatorSpec, error) {
	kind := strings.TrimSpace(params[control.ParamSinkKind])
	switch kind {
	case "", SinkKindDefault:
		return ops, nil
	case SinkKindKafka:
	default:
		return nil, fmt.Errorf("%s %q: allowed values are %s", control.ParamSinkKind, kind, strings.Join(quoted(SinkKinds), ", "))
	}
	consumed := map[string]bool{}
	for _, op := range ops {
		for _, in := range op.Inputs {
			consumed[in] = true
		}
	}
	replaced := 0
	for i := range ops {
		if slices.Contains(runtimeSinks, ops[i].Kind) && !consumed[ops[i].Name] {
			ops[i].Kind = control.KindKafkaSink
			replaced++
		}
	}
	if replaced == 0 {
		return nil, fmt.Errorf("%s %q: query %q ends in no runtime sink (%s) to replace", control.ParamSinkKind, kind, query, strings.Join(quoted(runtimeSinks), ", "))
	}
	return ops, nil
}

func quoted(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}
