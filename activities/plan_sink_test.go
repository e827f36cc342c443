package activities

import (
	"strings"
	"testing"

	"koala/dataplane/control"
)

func TestTransactionalSinkNotReconfigured(t *testing.T) {
	ops := []control.OperatorSpec{
		{Name: "counter", Kind: "keyed-counter"},
		{Name: "sink", Kind: control.KindKafkaSink},
		{Name: "collect", Kind: control.KindCollectSink},
	}
	withCP := map[string]string{control.ParamCheckpointStore: "file:///tmp/cp"}
	for _, tc := range []struct {
		name    string
		params  map[string]string
		op      string
		wantErr bool
	}{
		{"kafka sink with checkpoints", withCP, "sink", true},
		{"kafka sink without checkpoints", nil, "sink", false},
		{"keyed operator with checkpoints", withCP, "counter", false},
		{"collecting sink with checkpoints", withCP, "collect", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := transactionalSink(control.JobSpec{Operators: ops, Params: tc.params}, tc.op)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), `operator "sink"`) || !strings.Contains(err.Error(), "open transaction") {
				t.Fatalf("error %v, want one naming operator \"sink\" and its open transaction", err)
			}
		})
	}
}
