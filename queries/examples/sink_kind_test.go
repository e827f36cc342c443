package examples_test

import (
	"testing"

	"koala/dataplane/control"
	"koala/queries"
	_ "koala/queries/examples"
)

// Every example ends in a runtime sink, so each can write to Kafka.
func TestExamplesHonourSinkKind(t *testing.T) {
	for _, name := range []string{"example-counter", "example-filter", "example-mapper", "example-tumbling-window"} {
		ops, err := queries.OperatorsFor(name, nil, map[string]string{control.ParamSinkKind: queries.SinkKindKafka})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		last := ops[len(ops)-1]
		if last.Kind != control.KindKafkaSink {
			t.Errorf("%s: last operator %q is a %q, want %q", name, last.Name, last.Kind, control.KindKafkaSink)
		}
		for _, op := range ops[:len(ops)-1] {
			if op.Kind == control.KindKafkaSink {
				t.Errorf("%s: operator %q, not the sink, became a Kafka sink", name, op.Name)
			}
		}
	}
}
