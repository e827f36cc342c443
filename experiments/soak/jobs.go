package soak

import (
	"encoding/json"
	"fmt"
	"time"

	"koala/experiments"
	"koala/workflows"
)

// The three queries cannot be one job (a job runs one registered query),
// so each segment runs them as three concurrent jobs on the same stack;
// every fault hits all three.

// registered maps the soak's queries to the registered queries they run.
var registered = map[string]string{
	QueryCounter: "counter",                 // keyed count in state, (key, running count) out
	QueryWindow:  "example-tumbling-window", // 1 s event-time tumbling count per key
	QueryJoin:    "nexmark-q3",              // persons ⋈ auctions by seller, unbounded
}

// CheckpointInterval is the jobs' checkpoint interval (not in remote
// segments: checkpoints capture Pebble state only).
const CheckpointInterval = 3

// Rates and key spaces of the jobs: small enough that three jobs, the
// stack and the faults share two cores.
const (
	counterRate = 600
	counterKeys = 2000
	windowRate  = 400
	windowKeys  = 200
	joinRate    = 400
	joinPeople  = 300
)

// JobSpec is one job of a segment as the driver starts it.
type JobSpec struct {
	Query      string
	WorkflowID string
	OutTopic   string
	Input      workflows.ExperimentInput
}

// jobInput builds the RunExperiment input of query q in segment seg:
// the stack's task workers run its tasks, producer its generator (a
// worker that hosts no task, so a killed task worker never takes the
// input with it), and its sink writes to outTopic (transactional with
// checkpoints), which the oracle reads back.
//
// windowIdle > 0 is the window job's SourceIdleTimeoutMs; 0 leaves the
// runtime's default, which the soak checks (a Kafka restart used to make
// it drop records as late: dataplane/idleness.go).
func jobInput(q string, seg Segment, seed uint64, taskWorkers []string, producer string, brokers []string, outTopic, remoteAddr string, windowIdle time.Duration) (workflows.ExperimentInput, error) {
	m := map[string]any{
		"QueryName":           registered[q],
		"TotalRuntimeSeconds": int(seg.Length / time.Second),
		"Reconfigurations":    []any{},
		"StateBackendType":    "pebble",
		"NumPartitions":       4,
		"SourceParallelism":   1,
		"SinkParallelism":     1,
		"Seed":                int64(seed%1_000_000) + int64(seg.Index)*1_000_003,
		"Workers":             taskWorkers,
		"ProducerWorkers":     []string{producer},
		"KafkaBrokers":        brokers,
		"SinkKind":            "kafka",
		"KafkaSinkTopic":      outTopic,
	}
	switch seg.Protocol {
	case LazyEventual:
		m["ReconfigProtocol"] = workflows.ProtocolLazy
		m["LazyByKeyCancellingTaskMigrationMode"] = "eventual"
	case LazyFetchOnDemand:
		m["ReconfigProtocol"] = workflows.ProtocolLazy
		m["LazyByKeyCancellingTaskMigrationMode"] = "fetch-on-demand"
	case StopAndRestart:
		m["ReconfigProtocol"] = workflows.ProtocolStopAndRestart
	case DRRS:
		m["ReconfigProtocol"] = workflows.ProtocolDRRS
	case Remote:
		if remoteAddr == "" {
			return workflows.ExperimentInput{}, fmt.Errorf("segment %d: protocol remote needs a state server address", seg.Index)
		}
		m["ReconfigProtocol"] = workflows.ProtocolStopAndRestart
		m["StateBackendType"] = "remote-pebble"
		m["RemotePebbleAddrs"] = []string{remoteAddr}
	default:
		return workflows.ExperimentInput{}, fmt.Errorf("segment %d: protocol %q: allowed values are %s", seg.Index, seg.Protocol, joinAny(Rotation))
	}
	if seg.Protocol != Remote {
		m["CheckpointIntervalSeconds"] = CheckpointInterval
	}
	switch q {
	case QueryCounter:
		m["CounterParallelism"] = InitialParallelism
		m["RatePerSecond"] = counterRate
		m["NumKeys"] = counterKeys
	case QueryWindow:
		m["WindowParallelism"] = InitialParallelism
		m["RatePerSecond"] = windowRate
		m["NumKeys"] = windowKeys
		if windowIdle > 0 {
			m["SourceIdleTimeoutMs"] = windowIdle.Milliseconds()
		}
	case QueryJoin:
		for _, op := range reconfigurable[QueryJoin] {
			m[capitalize(op)+"Parallelism"] = InitialParallelism
		}
		m["RatePerSecond"] = joinRate
		src := map[string]any{"NumActivePeople": joinPeople}
		m["NexmarkLogicalSourceConfigs"] = []any{
			map[string]any{"EventType": "Person", "NexmarkSourceConfig": src},
			map[string]any{"EventType": "Auction", "NexmarkSourceConfig": src},
		}
	default:
		return workflows.ExperimentInput{}, fmt.Errorf("query %q: allowed values are %s", q, joinAny(Queries))
	}
	data, err := json.Marshal(m)
	if err != nil {
		return workflows.ExperimentInput{}, fmt.Errorf("soak config of %s: %w", q, err)
	}
	name := fmt.Sprintf("soak-%s-%s.json", q, seg.Protocol)
	in, _, err := experiments.ParseConfigNotes(name, data)
	if err != nil {
		return in, fmt.Errorf("soak config of %s: %w", q, err)
	}
	if err := experiments.CheckQuery(in); err != nil {
		return in, fmt.Errorf("soak config of %s: %w", q, err)
	}
	in.Name = "soak-" + q
	return in, nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
