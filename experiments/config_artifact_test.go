package experiments

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"koala/dataplane/control"
	"koala/queries"
	_ "koala/queries/nexmark" // the artifact's query names
	"koala/workflows"
	"koala/workflows/plan"
)

// artifactQuery1 is the artifact's hello-world config, as published.
const artifactQuery1 = `{"QueryName": "nexmark_query1", "WorkDir": "/home/ubuntu/ssd/koala", "AllNodeIPs": ["10.10.1.1"], "KafkaClusterIPs": ["10.10.1.1"], "ProducerIPs": ["10.10.1.1"], "WorkerIPs": ["10.10.1.1","10.10.1.1","10.10.1.1","10.10.1.1","10.10.1.1"], "NexmarkLogicalSourceConfigs": [{"EventType": "Bid", "NexmarkSourceConfig": {}}], "TotalRuntimeSeconds": 60, "Reconfigurations": [{"TriggerTimeSeconds": 30, "Type": "scaleup", "TargetOperator": "mapper", "TargetParrallelism": 2}], "MapperParallelism": 1, "SinkParallelism": 1, "NumBuckets": 128, "PartitionPolicy": "consistent-even", "StateBackendType": "pebble", "PebbleEnableConcurrentGetMany": true, "PebbleGetManyMaxConcurrency": 8, "PebbleGetManyBatchSize": 32, "BufferSize": 50, "BatchSize": 4096, "IsWarmUp": false, "LoadWarmUpData": false, "ReconfigProtocol": "stop-and-restart", "LazyProtocolVersion": "by-key", "InitialCustomTaskPlacement": ["source: 10.10.1.1", "mapper: 10.10.1.1", "sink: 10.10.1.1"]}`

// TestArtifactQuery1Config parses the artifact's hello-world config as
// published and checks what it maps to.
func TestArtifactQuery1Config(t *testing.T) {
	data, err := os.ReadFile("artifact/query1.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture, published any
	if err := json.Unmarshal(data, &fixture); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(artifactQuery1), &published); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fixture, published) {
		t.Fatal("artifact/query1.json differs from the published config")
	}
	in, err := LoadConfig("artifact/query1.json")
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	want := workflows.ExperimentInput{
		Name: "query1", QueryName: "nexmark_query1", TotalRuntimeSeconds: 60,
		Reconfigurations: []workflows.ReconfigSpec{{TriggerTimeSeconds: 30, Type: plan.KindScaleUp, TargetOperator: "mapper", TargetParallelism: 2}},
		ReconfigProtocol: workflows.ProtocolStopAndRestart, StateBackend: "pebble", NumBuckets: 128, BatchSize: 4096,
		Partitions: DefaultNumPartitions, Parallelism: map[string]int{"mapper": 1, "sink": 1},
		Producer: workflows.ProducerSpec{
			Generator: "nexmark", RatePerSec: DefaultRatePerSecond, NumKeys: DefaultNumKeys, Seed: DefaultSeed, ValueSize: DefaultValueSize,
			Producers: 1, Nexmark: &control.NexmarkSource{EventTypes: []string{"Bid"}},
		},
		MinWorkers: 1, DrainTimeoutSeconds: DefaultDrainTimeoutSeconds,
		Params: map[string]string{
			"WorkDir": "/home/ubuntu/ssd/koala", "AllNodeIPs": "10.10.1.1", "KafkaClusterIPs": "10.10.1.1", "ProducerIPs": "10.10.1.1",
			"WorkerIPs":                   "10.10.1.1,10.10.1.1,10.10.1.1,10.10.1.1,10.10.1.1",
			"NexmarkLogicalSourceConfigs": `[{"EventType":"Bid","NexmarkSourceConfig":{}}]`,
			"PartitionPolicy":             "consistent-even", "PebbleEnableConcurrentGetMany": "true", "PebbleGetManyMaxConcurrency": "8",
			"PebbleGetManyBatchSize": "32", "BufferSize": "50", "IsWarmUp": "false", "LoadWarmUpData": "false", "LazyProtocolVersion": "by-key",
			"InitialCustomTaskPlacement": "source=10.10.1.1,mapper=10.10.1.1,sink=10.10.1.1",
		},
	}
	if !reflect.DeepEqual(in, want) {
		got, _ := json.MarshalIndent(in, "", " ")
		exp, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("artifact/query1.json =\n%s\nwant\n%s", got, exp)
	}
	if len(in.KafkaBrokers) != 0 {
		t.Fatalf("KafkaClusterIPs set the brokers to %v: a one-host config uses the stack's Kafka", in.KafkaBrokers)
	}
}

// TestArtifactFields covers the mapping and the errors of the artifact's
// deployment and Nexmark fields.
func TestArtifactFields(t *testing.T) {
	base := func(extra string) string {
		return `{"QueryName": "nexmark_query1", "MapperParallelism": 1` + extra + `}`
	}
	cases := []struct {
		name   string
		config string
		errs   []string // substrings of the error; none = must parse
		check  func(t *testing.T, in workflows.ExperimentInput)
	}{
		{name: "partition policy", config: base(`, "PartitionPolicy": "hash"`), errs: []string{`"PartitionPolicy"`, `"hash"`, "allowed: consistent-even"}},
		{name: "placement operator", config: base(`, "InitialCustomTaskPlacement": ["join: 10.0.0.1"]`),
			errs: []string{`operator "join"`, "operators: source, mapper, sink"}},
		{name: "placement host", config: base(`, "AllNodeIPs": ["10.0.0.1"], "InitialCustomTaskPlacement": ["mapper: 10.0.0.2"]`),
			errs: []string{`"10.0.0.2"`, "hosts: 10.0.0.1"}},
		{name: "placement syntax", config: base(`, "InitialCustomTaskPlacement": ["mapper"]`), errs: []string{`"operator: host"`}},
		{name: "placement per task", config: base(`, "InitialCustomTaskPlacement": ["mapper: a", "mapper: b", "sink: a"]`),
			check: func(t *testing.T, in workflows.ExperimentInput) {
				if got := in.Params["InitialCustomTaskPlacement"]; got != "mapper=a,mapper=b,sink=a" {
					t.Fatalf("placement %q, want one entry per task in order", got)
				}
			}},
		{name: "placement unknown query", config: `{"QueryName": "nope", "InitialCustomTaskPlacement": ["mapper: a"]}`, errs: []string{"cannot check the operators", `"nope"`}},
		{name: "bad host", config: base(`, "WorkerIPs": ["10.0.0.1", "not an ip"]`), errs: []string{`"WorkerIPs"`, `"not an ip"`}},
		{name: "event type", config: base(`, "NexmarkLogicalSourceConfigs": [{"EventType": "Bids"}]`), errs: []string{`"Bids"`, "allowed: Person, Auction, Bid"}},
		{name: "missing event type", config: base(`, "NexmarkLogicalSourceConfigs": [{"NexmarkSourceConfig": {}}]`), errs: []string{`missing required field "EventType"`}},
		{name: "source knob", config: base(`, "NexmarkLogicalSourceConfigs": [{"EventType": "Bid", "NexmarkSourceConfig": {"HotBidderRatio": 2}}]`),
			errs: []string{`"HotBidderRatio"`, "2 is out of range (a share of the draws between 0 and 1)"}},
		{name: "source knob unknown", config: base(`, "NexmarkLogicalSourceConfigs": [{"EventType": "Bid", "NexmarkSourceConfig": {"HotBiderRatio": 0.5}}]`),
			errs: []string{`unknown field "HotBiderRatio"`, `did you mean "HotBidderRatio"?`}},
		{name: "knobs disagree", config: base(`, "NexmarkLogicalSourceConfigs": [{"EventType": "Bid", "NexmarkSourceConfig": {"NumActivePeople": 5}}, {"EventType": "Person", "NexmarkSourceConfig": {"NumActivePeople": 6}}]`),
			errs: []string{"6 differs from 5"}},
		{name: "generator conflict", config: base(`, "Generator": "keys", "NexmarkLogicalSourceConfigs": [{"EventType": "Bid"}]`), errs: []string{`need generator "nexmark"`}},
		{name: "events per producer", config: base(`, "NumProducers": 4, "NumEvents": 3, "NexmarkLogicalSourceConfigs": [{"EventType": "Bid"}]`), errs: []string{"fewer than the 4 producers"}},
		{name: "knobs reach the producer", config: base(`, "ProducerIPs": ["h", "h", "h"], "NumEvents": 3000, "OutputEventNumber": 10, "NexmarkLogicalSourceConfigs": [{"EventType": "Person", "NexmarkSourceConfig": {"NumActivePeople": 50, "HotSellersRatio": 3}}, {"EventType": "Auction", "NexmarkSourceConfig": {"HotAuctionsRatio": 5, "HotBiddersRatio": 6}}]`),
			check: func(t *testing.T, in workflows.ExperimentInput) {
				want := control.NexmarkSource{EventTypes: []string{"Person", "Auction"}, NumActivePeople: 50, HotSellersRatio: 3, HotAuctionsRatio: 5, HotBiddersRatio: 6, OutputEventNumber: 10}
				if in.Producer.Generator != "nexmark" || in.Producer.Nexmark == nil || !reflect.DeepEqual(*in.Producer.Nexmark, want) {
					t.Fatalf("producer %+v, nexmark %+v, want %+v", in.Producer, in.Producer.Nexmark, want)
				}
				if in.Producer.MaxEvents != 3000 || in.Producer.Producers != 3 {
					t.Fatalf("MaxEvents %d producers %d, want 3000 and 3 (one per ProducerIPs entry)", in.Producer.MaxEvents, in.Producer.Producers)
				}
			}},
		{name: "top-level knobs with the nexmark generator", config: base(`, "Generator": "nexmark", "HotBiddersRatio": 7`),
			check: func(t *testing.T, in workflows.ExperimentInput) {
				if in.Producer.Nexmark == nil || in.Producer.Nexmark.HotBiddersRatio != 7 || len(in.Producer.Nexmark.EventTypes) != 0 {
					t.Fatalf("nexmark %+v, want HotBiddersRatio 7 over every event type", in.Producer.Nexmark)
				}
			}},
		{name: "sellers mode", config: base(`, "Generator": "nexmark", "NexmarkSellers": "random"`), errs: []string{`"NexmarkSellers"`, `"random"`, "sequential, uniform, zipf"}},
		{name: "sellers with event types", config: base(`, "NexmarkSellers": "uniform", "NexmarkLogicalSourceConfigs": [{"EventType": "Bid"}]`),
			errs: []string{`"NexmarkSellers"`, "cannot select event types"}},
		{name: "sellers reach the producer", config: base(`, "Generator": "nexmark", "NexmarkSellers": "zipf", "NumKeys": 500, "Skew": 1.5, "OutputEventNumber": 46000`),
			check: func(t *testing.T, in workflows.ExperimentInput) {
				want := control.NexmarkSource{Sellers: "zipf", OutputEventNumber: 46000}
				if in.Producer.Nexmark == nil || !reflect.DeepEqual(*in.Producer.Nexmark, want) || in.Producer.NumKeys != 500 || in.Producer.Skew != 1.5 {
					t.Fatalf("producer %+v, nexmark %+v, want %+v over 500 keys, skew 1.5", in.Producer, in.Producer.Nexmark, want)
				}
			}},
		{name: "knobs without nexmark stay params", config: base(`, "NumEvents": 5`),
			check: func(t *testing.T, in workflows.ExperimentInput) {
				if in.Producer.Nexmark != nil || in.Producer.Generator != DefaultGenerator || in.Params["NumEvents"] != "5" {
					t.Fatalf("producer %+v params %v", in.Producer, in.Params)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, err := ParseConfig("c.json", []byte(c.config))
			if len(c.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, in)
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error with %q", c.errs)
			}
			for _, s := range c.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// TestNexmarkExampleConfigs checks the example configs of q4, q6* and q8:
// a lazy 2 → 4 scale-out of a stateful operator the query has.
func TestNexmarkExampleConfigs(t *testing.T) {
	for _, q := range []string{"q4", "q6", "q8"} {
		path := "queries/nexmark-" + q + ".json"
		in, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		ops, err := queries.Operators(in.QueryName, in.Parallelism)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(in.Reconfigurations) != 1 || in.ReconfigProtocol != workflows.ProtocolLazy || in.Producer.Nexmark == nil {
			t.Fatalf("%s: %d reconfigurations, protocol %s, nexmark %v: want one lazy rescale of a Nexmark stream", path, len(in.Reconfigurations), in.ReconfigProtocol, in.Producer.Nexmark)
		}
		r := in.Reconfigurations[0]
		found := false
		for _, op := range ops {
			if op.Name == r.TargetOperator {
				found = true
				if !op.Stateful || op.Parallelism != 2 || r.TargetParallelism != 4 || r.Type != plan.KindScaleUp {
					t.Errorf("%s: %s stateful %v, %d → %d (%s), want a stateful 2 → 4 scale-out", path, op.Name, op.Stateful, op.Parallelism, r.TargetParallelism, r.Type)
				}
			}
		}
		if !found {
			t.Errorf("%s: query %s has no operator %q", path, in.QueryName, r.TargetOperator)
		}
	}
}
