package experiments

import (
	"strings"
	"testing"
)

// TestCheckQuerySinkKind: SinkKind is validated when the config is read,
// and a reconfiguration of a transactional Kafka sink is rejected before
// the run starts, naming the field, the operator and why.
func TestCheckQuerySinkKind(t *testing.T) {
	const scaleSink = `"Reconfigurations": [{"TriggerTimeSeconds": 5, "Type": "scaleup", "TargetOperator": "sink", "TargetParrallelism": 2}]`
	const scaleCounter = `"Reconfigurations": [{"TriggerTimeSeconds": 5, "Type": "scaleup", "TargetOperator": "counter", "TargetParrallelism": 4}]`
	const moveSink = `"Reconfigurations": [{"TriggerTimeSeconds": 5, "Type": "task-migration", "TaskID": "sink-0", "TargetWorker": "w2"}]`
	for _, tc := range []struct {
		name, body string
		parseErr   []string // ParseConfig fails with these
		checkErr   []string // CheckQuery fails with these
	}{
		{name: "kafka sink, counter rescaled", body: `"SinkKind": "kafka", "CheckpointIntervalSeconds": 2, ` + scaleCounter},
		{name: "kafka sink without checkpoints rescaled", body: `"SinkKind": "kafka", ` + scaleSink},
		{name: "collecting sink rescaled", body: `"CheckpointIntervalSeconds": 2, ` + scaleSink},
		{name: "transactional sink rescaled", body: `"SinkKind": "kafka", "CheckpointIntervalSeconds": 2, ` + scaleSink,
			checkErr: []string{`"TargetOperator" in Reconfigurations[0]`, `operator "sink"`, "transactionally", "open transaction"}},
		{name: "transactional sink task moved", body: `"SinkKind": "kafka", "CheckpointIntervalSeconds": 2, ` + moveSink,
			checkErr: []string{`"TaskID" in Reconfigurations[0]`, `operator "sink"`}},
		{name: "unknown sink kind", body: `"SinkKind": "s3"`, parseErr: []string{`"SinkKind"`, `"s3"`, "default, kafka"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := `{"QueryName": "counter", "TotalRuntimeSeconds": 20, "KafkaBrokers": ["127.0.0.1:9092"], ` + tc.body + `}`
			in, err := ParseConfig("c.json", []byte(src))
			if len(tc.parseErr) > 0 {
				wantErr(t, err, tc.parseErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = CheckQuery(in)
			if len(tc.checkErr) > 0 {
				wantErr(t, err, tc.checkErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func wantErr(t *testing.T, err error, parts []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
}
