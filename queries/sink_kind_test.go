package queries

import (
	"strings"
	"testing"

	"koala/dataplane/control"
)

func TestOperatorsForSinkKind(t *testing.T) {
	for _, tc := range []struct {
		name, query, kind string
		wantSink          string // kind of operator "sink"
		wantErr           []string
	}{
		{name: "default", query: "counter", kind: "", wantSink: control.KindCollectSink},
		{name: "default named", query: "counter", kind: SinkKindDefault, wantSink: control.KindCollectSink},
		{name: "kafka counter", query: "counter", kind: SinkKindKafka, wantSink: control.KindKafkaSink},
		{name: "kafka hello", query: "hello", kind: SinkKindKafka, wantSink: control.KindKafkaSink},
		{name: "unknown", query: "counter", kind: "s3", wantErr: []string{`SinkKind "s3"`, `"default", "kafka"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := OperatorsFor(tc.query, nil, map[string]string{control.ParamSinkKind: tc.kind})
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want one containing %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range ops {
				if op.Name == "sink" && op.Kind != tc.wantSink {
					t.Errorf("sink kind %q, want %q", op.Kind, tc.wantSink)
				}
				if op.Name != "sink" && op.Kind == control.KindKafkaSink {
					t.Errorf("operator %q became a Kafka sink", op.Name)
				}
			}
			// The registry's own specs are not changed.
			again, _ := Operators(tc.query, nil)
			for _, op := range again {
				if op.Kind == control.KindKafkaSink {
					t.Errorf("registered query %q changed: %s is a Kafka sink", tc.query, op.Name)
				}
			}
		})
	}
}
