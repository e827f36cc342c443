package experiments

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"koala/workflows"
	"koala/workflows/plan"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/config")

func TestHelloConfig(t *testing.T) {
	in, err := LoadConfig("hello.json")
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := workflows.ExperimentInput{
		Name:                "hello",
		QueryName:           "hello",
		TotalRuntimeSeconds: 90,
		Reconfigurations: []workflows.ReconfigSpec{
			{TriggerTimeSeconds: 30, Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: 2},
		},
		ReconfigProtocol: workflows.ProtocolStopAndRestart,
		StateBackend:     "memory",
		NumBuckets:       128,
		BatchSize:        1000,
		Partitions:       4,
		Parallelism:      map[string]int{"source": 1, "mapper": 1, "sink": 1},
		Producer: workflows.ProducerSpec{
			Generator: "keys", RatePerSec: 2000, NumKeys: 1000, Seed: 1, ValueSize: 64, Producers: 1,
		},
		MinWorkers:          1,
		Params:              map[string]string{},
		DrainTimeoutSeconds: 60,
	}
	if !reflect.DeepEqual(in, want) {
		t.Errorf("hello.json =\n%+v\nwant\n%+v", in, want)
	}
}

func TestDefaults(t *testing.T) {
	in, err := ParseConfig("dir/minimal.json", []byte(`{"QueryName": "q"}`))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Name", in.Name, "minimal"},
		{"TotalRuntimeSeconds", in.TotalRuntimeSeconds, 90},
		{"ReconfigProtocol", in.ReconfigProtocol, "stop-and-restart"},
		{"StateBackend", in.StateBackend, "pebble"},
		{"NumBuckets", in.NumBuckets, 128},
		{"BatchSize", in.BatchSize, 1000},
		{"Partitions", in.Partitions, 4},
		{"RatePerSec", in.Producer.RatePerSec, 2000},
		{"NumKeys", in.Producer.NumKeys, 1000},
		{"Seed", in.Producer.Seed, int64(1)},
		{"ValueSize", in.Producer.ValueSize, 64},
		{"Generator", in.Producer.Generator, "keys"},
		{"Producers", in.Producer.Producers, 1},
		{"MinWorkers", in.MinWorkers, 1},
		{"DrainTimeoutSeconds", in.DrainTimeoutSeconds, 60},
		{"Reconfigurations", len(in.Reconfigurations), 0},
		{"Workers", len(in.Workers), 0},
		{"KafkaBrokers", len(in.KafkaBrokers), 0},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestAllFieldsGolden(t *testing.T) {
	path := filepath.Join("testdata", "config", "lazy_all_fields.json")
	in, err := LoadConfig(path)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	got, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := strings.TrimSuffix(path, ".json") + ".golden"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("parsed config differs from %s:\n%s", golden, got)
	}
	// Spot checks that do not depend on the golden file.
	if in.Params["LazyByKeyGradualMigrationBatchSize"] != "-1" {
		t.Errorf("Params[LazyByKeyGradualMigrationBatchSize] = %q, want -1", in.Params["LazyByKeyGradualMigrationBatchSize"])
	}
	if in.Params["RateLimiterConfig"] != `{"RateLimit":[10000,16000],"RateChangeInterval":[1500]}` {
		t.Errorf("RateLimiterConfig kept as %q", in.Params["RateLimiterConfig"])
	}
	if want := []string{"10.0.0.11:9092", "10.0.0.12:19092"}; !reflect.DeepEqual(in.KafkaBrokers, want) {
		t.Errorf("KafkaBrokers from KafkaIPs = %v, want %v", in.KafkaBrokers, want)
	}
	wantR := []workflows.ReconfigSpec{ // sorted by trigger time
		{TriggerTimeSeconds: 180, Type: "scaleup", TargetOperator: "join", TargetParallelism: 4},
		{TriggerTimeSeconds: 360, Type: "scaledown", TargetOperator: "join", TargetParallelism: 2},
	}
	if !reflect.DeepEqual(in.Reconfigurations, wantR) {
		t.Errorf("Reconfigurations = %+v, want %+v", in.Reconfigurations, wantR)
	}
	if want := map[string]int{"source": 4, "join": 2, "sink": 1}; !reflect.DeepEqual(in.Parallelism, want) {
		t.Errorf("Parallelism = %v, want %v", in.Parallelism, want)
	}
}

func TestTargetParallelismSpellingsAndTypes(t *testing.T) {
	for _, tc := range []struct{ field, typ, want string }{
		{"TargetParrallelism", "scaleup", "scaleup"},
		{"TargetParallelism", "scaleup", "scaleup"},
		{"TargetParrallelism", "scale-out", "scaleup"},
		{"TargetParallelism", "scale-in", "scaledown"},
		{"TargetParallelism", "scaledown", "scaledown"},
	} {
		p := 3
		if tc.want == "scaledown" {
			p = 1
		}
		doc := `{"QueryName":"q","MapperParallelism":2,"Reconfigurations":[{"TriggerTimeSeconds":10,"Type":"` + tc.typ +
			`","TargetOperator":"mapper","` + tc.field + `":` + itoa(p) + `}]}`
		in, err := ParseConfig("t.json", []byte(doc))
		if err != nil {
			t.Fatalf("%s/%s: %v", tc.field, tc.typ, err)
		}
		r := in.Reconfigurations[0]
		if r.TargetParallelism != p || r.Type != tc.want || r.TargetOperator != "mapper" || r.TriggerTimeSeconds != 10 {
			t.Errorf("%s/%s: got %+v", tc.field, tc.typ, r)
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestParallelismFields(t *testing.T) {
	in, err := ParseConfig("t.json", []byte(`{"QueryName":"q","SourceParallelism":2,"MapperParallelism":3,"Q6AggParallelism":1,"sinkParallelism":4}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"source": 2, "mapper": 3, "q6Agg": 1, "sink": 4}
	if !reflect.DeepEqual(in.Parallelism, want) {
		t.Errorf("Parallelism = %v, want %v", in.Parallelism, want)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // substrings, all must appear
	}{
		{"unknown reconfig field", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":30,"Type":"scaleup","TargetOperator":"mapper","TargetParalelism":2}]}`,
			[]string{`config hello.json: unknown field "TargetParalelism" in Reconfigurations[0] (did you mean "TargetParrallelism"?)`,
				`Reconfigurations[0]: missing required field "TargetParrallelism"`}},
		{"unknown top field", `{"QueryName":"q","TotalRuntimeSecond":90}`,
			[]string{`config hello.json: unknown field "TotalRuntimeSecond" (did you mean "TotalRuntimeSeconds"?)`}},
		{"wrong case", `{"QueryName":"q","numBuckets":64}`,
			[]string{`unknown field "numBuckets" (did you mean "NumBuckets"?)`}},
		{"misspelt parallelism", `{"QueryName":"q","MapperParalelism":2}`,
			[]string{`unknown field "MapperParalelism" (did you mean "MapperParallelism"?)`}},
		{"unknown far field", `{"QueryName":"q","Zzz":1}`,
			[]string{`unknown field "Zzz"`}},
		{"target at top level", `{"QueryName":"q","TargetParrallelism":2}`,
			[]string{`unknown field "TargetParrallelism" at the top level (it belongs inside a Reconfigurations entry)`}},
		{"missing query", `{}`, []string{`config hello.json: missing required field "QueryName"`}},
		{"empty query", `{"QueryName":""}`, []string{`field "QueryName": must not be empty`}},
		{"number as string", `{"QueryName":"q","TotalRuntimeSeconds":"90"}`,
			[]string{`config hello.json: field "TotalRuntimeSeconds": expected a number, got string`}},
		{"fraction", `{"QueryName":"q","BatchSize":2.5}`, []string{`field "BatchSize": expected a whole number, got 2.5`}},
		{"string as number", `{"QueryName":7}`, []string{`field "QueryName": expected a string, got number`}},
		{"bool", `{"QueryName":"q","IsWarmUp":"yes"}`, []string{`field "IsWarmUp": expected true or false, got string`}},
		{"null", `{"QueryName":"q","NumKeys":null}`, []string{`field "NumKeys": expected a number, got null`}},
		{"list", `{"QueryName":"q","Workers":"w1"}`, []string{`field "Workers": expected an array of strings, got string`}},
		{"list item", `{"QueryName":"q","Workers":["w1",2]}`, []string{`field "Workers"[1]: expected a string, got number`}},
		{"duplicate worker", `{"QueryName":"q","Workers":["w1","w1"]}`, []string{`field "Workers": "w1" is listed twice`}},
		{"rate limiter scalar", `{"QueryName":"q","RateLimiterConfig":5}`, []string{`field "RateLimiterConfig": expected an object {"RateLimit": [...], "RateChangeInterval": [...]}, got number`}},
		{"rate limiter values", `{"QueryName":"q","RateLimiterConfig":{"RateLimit":[20000000,-1],"RateChangeInterval":[0,5]}}`, []string{
			`field "RateLimiterConfig": RateLimiterConfig.RateLimit[0]: 20000000 is out of range (events per 200ms interval per producer, between 0 and 10000000)`,
			`field "RateLimiterConfig": RateLimiterConfig.RateLimit[1]: -1 is out of range`,
			`field "RateLimiterConfig": RateLimiterConfig.RateChangeInterval[0]: 0 is out of range`}},
		{"rate limiter field", `{"QueryName":"q","RateLimiterConfig":{"RateLimits":[1]}}`, []string{`unknown field "RateLimits" in field "RateLimiterConfig" (did you mean "RateLimit"?)`}},
		{"window", `{"QueryName":"q","WindowDuration":true}`, []string{`field "WindowDuration": expected a number or a string, got boolean`}},
		{"reconfigs not array", `{"QueryName":"q","Reconfigurations":{}}`, []string{`field "Reconfigurations": expected an array of objects, got object`}},
		{"reconfig not object", `{"QueryName":"q","Reconfigurations":[3]}`, []string{`Reconfigurations[0]: expected an object, got number`}},
		{"index kept after bad entry", `{"QueryName":"q","TotalRuntimeSeconds":60,"Reconfigurations":[3,{"TriggerTimeSeconds":70,"Type":"scaleup","TargetOperator":"m","TargetParrallelism":2}]}`,
			[]string{`Reconfigurations[0]: expected an object, got number`,
				`field "TriggerTimeSeconds" in Reconfigurations[1]: 70 is out of range (must be less than TotalRuntimeSeconds (60))`}},
		{"duplicate reconfig field", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"TriggerTimeSeconds":2,"Type":"scaleup","TargetOperator":"m","TargetParrallelism":2}]}`,
			[]string{`field "TriggerTimeSeconds" in Reconfigurations[0] appears more than once`}},
		{"runtime zero", `{"QueryName":"q","TotalRuntimeSeconds":0}`, []string{`field "TotalRuntimeSeconds": 0 is out of range (must be at least 1)`}},
		{"buckets", `{"QueryName":"q","NumBuckets":70000}`, []string{`field "NumBuckets": 70000 is out of range (must be between 1 and 65536)`}},
		{"buckets huge", `{"QueryName":"q","NumBuckets":1e30}`, []string{`field "NumBuckets": 1e30 is out of range (must be between 1 and 65536)`}},
		{"batch", `{"QueryName":"q","BatchSize":0}`, []string{`field "BatchSize": 0 is out of range (must be at least 1)`}},
		{"partitions", `{"QueryName":"q","NumPartitions":-1}`, []string{`field "NumPartitions": -1 is out of range (must be at least 1)`}},
		{"gradual batch", `{"QueryName":"q","LazyByKeyGradualMigrationBatchSize":-2}`,
			[]string{`field "LazyByKeyGradualMigrationBatchSize": -2 is out of range (must be at least -1)`}},
		{"parallelism", `{"QueryName":"q","MapperParallelism":0}`, []string{`field "MapperParallelism": 0 is out of range (must be at least 1)`}},
		{"parallelism above buckets", `{"QueryName":"q","NumBuckets":4,"MapperParallelism":5}`,
			[]string{`field "MapperParallelism": 5 is out of range (must be between 1 and NumBuckets (4))`}},
		{"parallelism twice", `{"QueryName":"q","MapperParallelism":1,"mapperParallelism":2}`,
			[]string{`field "mapperParallelism" and "MapperParallelism" both set the parallelism of operator "mapper"`}},
		{"protocol", `{"QueryName":"q","ReconfigProtocol":"koala"}`,
			[]string{`field "ReconfigProtocol": unknown value "koala" (allowed: lazy, stop-and-restart, drrs)`}},
		{"backend", `{"QueryName":"q","StateBackendType":"tikv"}`,
			[]string{`field "StateBackendType": unknown value "tikv" (allowed: pebble, remote-pebble, memory)`}},
		{"migration mode", `{"QueryName":"q","LazyByKeyCancellingTaskMigrationMode":"lazy"}`,
			[]string{`field "LazyByKeyCancellingTaskMigrationMode": unknown value "lazy" (allowed: fetch-on-demand, eventual)`}},
		{"rebalance with parallelism", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"rebalance","TargetOperator":"m","TargetParrallelism":2}]}`,
			[]string{`Reconfigurations[0]: field "TargetParrallelism" does not apply to type "rebalance" (fields of that type: TriggerTimeSeconds, Type, TargetOperator, BucketLoad)`}},
		{"rebalance load length", `{"QueryName":"q","NumBuckets":4,"Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"rebalance","TargetOperator":"m","BucketLoad":[1,2]}]}`,
			[]string{`field "BucketLoad" in Reconfigurations[0]: has 2 entries, NumBuckets is 4`}},
		{"rebalance load negative", `{"QueryName":"q","NumBuckets":2,"Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"rebalance","TargetOperator":"m","BucketLoad":[1,-2]}]}`,
			[]string{`field "BucketLoad" in Reconfigurations[0]: entry 1 is -2, loads must be ≥ 0`}},
		{"skew", `{"QueryName":"q","Skew":"high"}`, []string{`field "Skew": expected a number between 0 and 10`}},
		{"task migration missing", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"task-migration","TargetOperator":"m","TargetParrallelism":2}]}`,
			[]string{`Reconfigurations[0]: field "TargetParrallelism" does not apply to type "task-migration"`}},
		{"task migration without operator or task", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"task-migration","TargetWorker":"w2"}]}`,
			[]string{`Reconfigurations[0]: a task-migration needs "TargetOperator" (its task and worker are then chosen when it runs) or "TaskID"`}},
		{"bad type", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"grow","TargetOperator":"m","TargetParrallelism":2}]}`,
			[]string{`field "Type" in Reconfigurations[0]: unknown type "grow" (allowed: rebalance, scale-down, scale-in, scale-out, scale-up, scaledown, scalein, scaleout, scaleup, task-migration)`}},
		{"trigger negative", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":-1,"Type":"scaleup","TargetOperator":"m","TargetParrallelism":2}]}`,
			[]string{`field "TriggerTimeSeconds" in Reconfigurations[0]: -1 is out of range (must be at least 0)`}},
		{"trigger after end", `{"QueryName":"q","TotalRuntimeSeconds":60,"Reconfigurations":[{"TriggerTimeSeconds":60,"Type":"scaleup","TargetOperator":"m","TargetParrallelism":2}]}`,
			[]string{`field "TriggerTimeSeconds" in Reconfigurations[0]: 60 is out of range (must be less than TotalRuntimeSeconds (60))`}},
		{"target zero", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"scaleup","TargetOperator":"m","TargetParallelism":0}]}`,
			[]string{`field "TargetParallelism" in Reconfigurations[0]: 0 is out of range (must be at least 1)`}},
		{"target above buckets", `{"QueryName":"q","NumBuckets":8,"Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"scaleup","TargetOperator":"m","TargetParallelism":9}]}`,
			[]string{`field "TargetParallelism" in Reconfigurations[0]: 9 is out of range (must be between 1 and NumBuckets (8))`}},
		{"both spellings", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"scaleup","TargetOperator":"m","TargetParallelism":2,"TargetParrallelism":2}]}`,
			[]string{`Reconfigurations[0]: both "TargetParrallelism" and "TargetParallelism" are given; use one`}},
		{"missing operator", `{"QueryName":"q","Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"scaleup","TargetParrallelism":2}]}`,
			[]string{`Reconfigurations[0]: missing required field "TargetOperator"`}},
		{"scaleup not up", `{"QueryName":"q","MapperParallelism":2,"Reconfigurations":[{"TriggerTimeSeconds":1,"Type":"scaleup","TargetOperator":"mapper","TargetParrallelism":2}]}`,
			[]string{`reconfiguration at 1 s: "scaleup" of operator "mapper" to parallelism 2 does not increase it (it is 2 then)`}},
		{"scaledown after up", `{"QueryName":"q","MapperParallelism":1,"Reconfigurations":[{"TriggerTimeSeconds":20,"Type":"scaledown","TargetOperator":"mapper","TargetParrallelism":4},{"TriggerTimeSeconds":10,"Type":"scaleup","TargetOperator":"mapper","TargetParrallelism":4}]}`,
			[]string{`reconfiguration at 20 s: "scaledown" of operator "mapper" to parallelism 4 does not decrease it (it is 4 then)`}},
		{"min workers", `{"QueryName":"q","MinWorkers":3,"Workers":["a","b"]}`,
			[]string{`field "MinWorkers": 3 is out of range (must be at most the number of Workers (2))`}},
		{"task placement", `{"QueryName":"q","TaskPlacement":"packed"}`,
			[]string{`field "TaskPlacement": unknown value "packed" (allowed: round-robin, co-locate)`}},
		{"fetch wait", `{"QueryName":"q","SourceFetchMaxWaitMs":0}`,
			[]string{`field "SourceFetchMaxWaitMs": 0 is out of range (must be at least 1)`}},
		{"producer worker list", `{"QueryName":"q","ProducerWorkers":"w3"}`, []string{`field "ProducerWorkers": expected an array of strings, got string`}},
		{"producer worker twice", `{"QueryName":"q","ProducerWorkers":["w3","w3"]}`, []string{`field "ProducerWorkers": "w3" is listed twice`}},
		{"producer worker hosts tasks", `{"QueryName":"q","Workers":["w1","w2"],"ProducerWorkers":["w2"]}`,
			[]string{`field "ProducerWorkers": "w2" is also in Workers (a producer worker hosts no task; allowed: worker ids not in Workers)`}},
		{"duplicate field", `{"QueryName":"q","NumKeys":1,"NumKeys":2}`, []string{`field "NumKeys" appears more than once`}},
		{"not an object", `[1,2]`, []string{`config hello.json: expected a JSON object at the top level, got array`}},
		{"empty", ``, []string{`config hello.json: empty file: expected a JSON object`}},
		{"syntax", "{\n  \"QueryName\": \"q\",\n  \"NumKeys\": 1,,\n}", []string{`config hello.json: invalid JSON at line 3, column 16`}},
		{"trailing data", `{"QueryName":"q"} {}`, []string{`invalid JSON`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("hello.json", []byte(tc.doc))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestErrorsCollectedInSortedOrder(t *testing.T) {
	doc := `{"ZFoo":1,"TotalRuntimeSeconds":"x","BatchSize":0,"QueryName":"q","NumBuckets":-3}`
	_, err := ParseConfig("c.json", []byte(doc))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`config c.json: field "BatchSize": 0 is out of range (must be at least 1)`,
		`config c.json: field "NumBuckets": -3 is out of range (must be between 1 and 65536)`,
		`config c.json: field "TotalRuntimeSeconds": expected a number, got string`,
		`config c.json: unknown field "ZFoo"`,
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("errors =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// errors.Join keeps the parts reachable.
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 4 {
		t.Errorf("want 4 joined errors, got %T", err)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.json"))
	if err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"TargetParalelism", "TargetParrallelism", 2}, {"flaw", "lawn", 2}, {"héllo", "hello", 1},
	} {
		if got := levenshtein(tc.a, tc.b); got != tc.d {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestRebalanceAndMigrationConfig(t *testing.T) {
	in, err := ParseConfig("skew", []byte(`{"QueryName":"counter","NumBuckets":16,"Generator":"zipf","Skew":1.2,"NumKeys":500,
		"TotalRuntimeSeconds":60,"Reconfigurations":[
		{"TriggerTimeSeconds":10,"Type":"rebalance","TargetOperator":"counter"},
		{"TriggerTimeSeconds":20,"Type":"task-migration","TaskID":"counter-0","TargetWorker":"w2"},
		{"TriggerTimeSeconds":30,"Type":"rebalance","TargetOperator":"counter","BucketLoad":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,9]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.Producer.Generator != "zipf" || in.Producer.Skew != 1.2 {
		t.Fatalf("producer %+v", in.Producer)
	}
	rs := in.Reconfigurations
	if len(rs) != 4 {
		t.Fatalf("%d reconfigurations, want 4 (the migration is two steps): %+v", len(rs), rs)
	}
	if rs[0].Type != "rebalance" || len(rs[0].BucketLoad) != 0 {
		t.Fatalf("rebalance without BucketLoad must leave it empty (the plan step measures the load): %+v", rs[0])
	}
	for _, r := range rs[1:3] {
		if r.Type != "task-migration" || r.TaskID != "counter-0" || r.TargetWorker != "w2" || r.TriggerTimeSeconds != 20 {
			t.Fatalf("migration step: %+v", r)
		}
	}
	if rs[3].BucketLoad[15] != 9 {
		t.Fatalf("explicit load: %+v", rs[3])
	}
}

// TestCheckpointInterval parses CheckpointIntervalSeconds (default 0: no
// checkpoints) and rejects a negative one naming the field.
func TestCheckpointInterval(t *testing.T) {
	in, err := ParseConfig("c.json", []byte(`{"QueryName": "counter", "CheckpointIntervalSeconds": 10}`))
	if err != nil {
		t.Fatal(err)
	}
	if in.CheckpointIntervalSeconds != 10 {
		t.Fatalf("CheckpointIntervalSeconds = %d, want 10", in.CheckpointIntervalSeconds)
	}
	if in, _ := ParseConfig("c.json", []byte(`{"QueryName": "counter"}`)); in.CheckpointIntervalSeconds != 0 {
		t.Fatalf("default CheckpointIntervalSeconds = %d, want 0", in.CheckpointIntervalSeconds)
	}
	_, err = ParseConfig("c.json", []byte(`{"QueryName": "counter", "CheckpointIntervalSeconds": -1}`))
	if err == nil || !strings.Contains(err.Error(), "CheckpointIntervalSeconds") {
		t.Fatalf("negative interval: %v, want an error naming the field", err)
	}
}

// A Nexmark knob combination the producers' generator refuses fails the
// config, before any workflow starts.
func TestParseConfigNexmarkGeneratorRefused(t *testing.T) {
	_, err := ParseConfig("q6.json", []byte(`{"QueryName": "nexmark_query6_modified", "NexmarkSellers": "uniform",
		"NexmarkLogicalSourceConfigs": [{"EventType": "ClosedAuction", "NexmarkSourceConfig": {"NumActivePeople": 1000, "HotSellerRatio": 0.25}}]}`))
	if err == nil || !strings.Contains(err.Error(), "HotSellerRatio 0.25 with sellers \"uniform\"") {
		t.Fatalf("error %v, want one naming HotSellerRatio and the sellers mode", err)
	}
	if _, err := ParseConfig("q6.json", []byte(`{"QueryName": "nexmark_query6_modified", "NexmarkSellers": "uniform",
		"NexmarkLogicalSourceConfigs": [{"EventType": "ClosedAuction", "NexmarkSourceConfig": {"NumActivePeople": 1000}}]}`)); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}
