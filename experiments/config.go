package experiments

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/workflows"
	"koala/workflows/plan"
)

// Defaults of an experiment config.
const (
	DefaultTotalRuntimeSeconds = 90
	DefaultNumBuckets          = control.DefaultNumBuckets
	DefaultBatchSize           = 1000
	DefaultNumPartitions       = 4
	DefaultRatePerSecond       = 2000
	DefaultNumKeys             = 1000
	DefaultSeed                = 1
	DefaultValueSize           = 64
	DefaultGenerator           = produce.DefaultGenerator
	DefaultNumProducers        = 1
	DefaultMinWorkers          = 1
	DefaultDrainTimeoutSeconds = 60
	DefaultKafkaPort           = "9092"
	MaxNumBuckets              = 65536
)

// LoadConfig reads and parses the experiment config at path (see ParseConfig).
func LoadConfig(path string) (workflows.ExperimentInput, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return workflows.ExperimentInput{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig parses an experiment config in the Koala artifact's JSON format
// (plus koala's own fields) into the input of the RunExperiment workflow.
//
// name is the file name: it prefixes every error and, without an
// "Experiment" field, names the experiment (base name without extension).
//
// Field names are case-sensitive. Unknown fields, wrong JSON types and
// out-of-range values are errors; every problem found is reported (joined
// with errors.Join, fields in sorted order, so the first one is stable), and
// unknown names come with the nearest known one as a suggestion.
//
// Knobs that only some protocols read (LazyByKey…, BufferSize, NumSubscales,
// RateLimiterConfig, host lists, …) are kept in ExperimentInput.Params as
// strings under their artifact names: numbers and booleans in Go syntax,
// lists of strings comma-joined, JSON objects and arrays as compact JSON.
// Reconfigurations are returned ordered by trigger time (stable).
func ParseConfig(name string, data []byte) (workflows.ExperimentInput, error) {
	in, _, err := ParseConfigNotes(name, data)
	return in, err
}

// ParseConfigNotes is ParseConfig that also returns its notes: one line
// per artifact field that is accepted but means something else here, or
// nothing (WorkDir, …), for the caller to print.
func ParseConfigNotes(name string, data []byte) (workflows.ExperimentInput, []string, error) {
	p := &parser{file: name}
	in := p.parse(data)
	if len(p.errs) == 0 {
		if err := checkNexmarkGenerator(in); err != nil {
			p.errorf("%v", err)
		}
	}
	if len(p.errs) > 0 {
		return workflows.ExperimentInput{}, p.notes, errors.Join(p.errs...)
	}
	return in, p.notes, nil
}

// member is one "name": value pair of a JSON object.
type member struct {
	name string
	raw  json.RawMessage
}

type parser struct {
	file  string
	errs  []error
	notes []string
	// artifact: the config is the artifact's (it has a WorkDir). Its
	// reconfigurations due after the run's end are left out (they never
	// fire there), and a rebalance may restate the operator's parallelism.
	artifact bool
}

// notef records a note (see ParseConfigNotes), prefixed like errors.
func (p *parser) notef(format string, args ...any) {
	prefix := "config: "
	if p.file != "" {
		prefix = "config " + p.file + ": "
	}
	p.notes = append(p.notes, prefix+fmt.Sprintf(format, args...))
}

func (p *parser) errorf(format string, args ...any) {
	prefix := "config: "
	if p.file != "" {
		prefix = "config " + p.file + ": "
	}
	p.errs = append(p.errs, errors.New(prefix+fmt.Sprintf(format, args...)))
}

// where names a field in error messages: `field "X"` or `field "X" in Reconfigurations[0]`.
func where(field, in string) string {
	if in == "" {
		return fmt.Sprintf("field %q", field)
	}
	return fmt.Sprintf("field %q in %s", field, in)
}

// Fields with their own handling (see parse).
var topFields = []string{
	"QueryName", "Experiment", "TotalRuntimeSeconds", "Reconfigurations",
	"ReconfigProtocol", "StateBackendType", "NumBuckets", "BatchSize",
	"NumPartitions", "RatePerSecond", "NumKeys", "Seed", "ValueSize",
	"Generator", "Skew", "NumProducers", "MinWorkers", "Workers", "ProducerWorkers",
	"DrainTimeoutSeconds", "KafkaBrokers", "CheckpointIntervalSeconds", "Autoscaler",
}

var (
	protocols     = []string{workflows.ProtocolLazy, workflows.ProtocolStopAndRestart, workflows.ProtocolDRRS}
	stateBackends = []string{"pebble", "remote-pebble", "memory"}
)

func (p *parser) parse(data []byte) workflows.ExperimentInput {
	in := workflows.ExperimentInput{
		TotalRuntimeSeconds: DefaultTotalRuntimeSeconds,
		ReconfigProtocol:    workflows.ProtocolStopAndRestart,
		StateBackend:        "pebble",
		NumBuckets:          DefaultNumBuckets,
		BatchSize:           DefaultBatchSize,
		Partitions:          DefaultNumPartitions,
		Parallelism:         map[string]int{},
		Producer: workflows.ProducerSpec{
			Generator:  DefaultGenerator,
			RatePerSec: DefaultRatePerSecond,
			NumKeys:    DefaultNumKeys,
			Seed:       DefaultSeed,
			ValueSize:  DefaultValueSize,
			Producers:  DefaultNumProducers,
		},
		MinWorkers:          DefaultMinWorkers,
		DrainTimeoutSeconds: DefaultDrainTimeoutSeconds,
		Params:              map[string]string{},
	}
	members, err := objectMembers(data)
	if err != nil {
		p.errorf("%s", err)
		return in
	}
	seen := map[string]bool{}
	for _, m := range members {
		if seen[m.name] {
			p.errorf("%s appears more than once", where(m.name, ""))
		}
		seen[m.name] = true
	}
	// Every config of the artifact names its WorkDir (its runExperiment.py
	// requires it); such a config is read as the artifact's scripts read
	// it where the two differ (see p.artifact).
	p.artifact = seen["WorkDir"]
	slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })

	known := slices.Concat(topFields, sortedKeys(artifactKnobs))
	parallelismFrom := map[string]string{} // operator → field that set it
	var reconfigs []workflows.ReconfigSpec
	var reconfigMeta []entryMeta
	gotReconfigs := false
	for i, m := range members {
		f, raw := m.name, m.raw
		if i > 0 && members[i-1].name == f {
			continue // repeated field, reported above
		}
		at := where(f, "")
		switch f {
		case "QueryName":
			in.QueryName, _ = p.str(raw, at)
		case "Experiment":
			in.Name, _ = p.str(raw, at)
		case "TotalRuntimeSeconds":
			p.intTo(&in.TotalRuntimeSeconds, raw, at, 1, math.MaxInt32)
		case "Reconfigurations":
			reconfigs, reconfigMeta = p.reconfigurations(raw)
			gotReconfigs = true
		case "ReconfigProtocol":
			p.enumTo(&in.ReconfigProtocol, raw, at, protocols)
		case "StateBackendType":
			p.enumTo(&in.StateBackend, raw, at, stateBackends)
		case "NumBuckets":
			p.intTo(&in.NumBuckets, raw, at, 1, MaxNumBuckets)
		case "BatchSize":
			p.intTo(&in.BatchSize, raw, at, 1, math.MaxInt32)
		case "NumPartitions":
			p.intTo(&in.Partitions, raw, at, 1, math.MaxInt32)
		case "RatePerSecond":
			p.intTo(&in.Producer.RatePerSec, raw, at, 1, math.MaxInt32)
		case "NumKeys":
			p.intTo(&in.Producer.NumKeys, raw, at, 1, math.MaxInt)
		case "Seed":
			if v, ok := p.integer(raw, at, math.MinInt64, math.MaxInt64); ok {
				in.Producer.Seed = v
			}
		case "ValueSize":
			p.intTo(&in.Producer.ValueSize, raw, at, 0, math.MaxInt32)
		case "Generator":
			if v, ok := p.str(raw, at); ok {
				in.Producer.Generator = v
			}
		case "Skew":
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil || v < 0 || v > 10 {
				p.errorf("%s: expected a number between 0 and 10 (the Zipf exponent of the \"zipf\" generator or of Nexmark \"zipf\" sellers), got %s", at, compact(raw))
			} else {
				in.Producer.Skew = v
			}
		case "NumProducers":
			p.intTo(&in.Producer.Producers, raw, at, 1, math.MaxInt32)
		case "MinWorkers":
			p.intTo(&in.MinWorkers, raw, at, 1, math.MaxInt32)
		case "Workers":
			if v, ok := p.strs(raw, at, true); ok {
				in.Workers = v
			}
		case "ProducerWorkers":
			if v, ok := p.strs(raw, at, true); ok {
				in.ProducerWorkers = v
			}
		case "DrainTimeoutSeconds":
			p.intTo(&in.DrainTimeoutSeconds, raw, at, 1, math.MaxInt32)
		case "CheckpointIntervalSeconds":
			p.intTo(&in.CheckpointIntervalSeconds, raw, at, 0, math.MaxInt32)
		case "KafkaBrokers":
			if v, ok := p.strs(raw, at, false); ok {
				in.KafkaBrokers = v
			}
		case "Autoscaler":
			in.Autoscaler = p.autoscaler(raw) // config_autoscaler.go
		default:
			if k, ok := artifactKnobs[f]; ok {
				if v, ok := p.knob(k, raw, at); ok {
					in.Params[f] = v
				}
				continue
			}
			if parallelismField.MatchString(f) && f != targetAlias {
				op := strings.ToLower(f[:1]) + strings.TrimSuffix(f[1:], "Parallelism")
				if prev, dup := parallelismFrom[op]; dup {
					p.errorf("%s and %q both set the parallelism of operator %q", at, prev, op)
					continue
				}
				parallelismFrom[op] = f
				var v int
				if p.intTo(&v, raw, at, 1, math.MaxInt32) {
					in.Parallelism[op] = v
				}
				continue
			}
			if f == targetAlias || f == "TargetParrallelism" || f == "TargetOperator" || f == "TriggerTimeSeconds" {
				p.errorf("unknown field %q at the top level (it belongs inside a Reconfigurations entry)", f)
				continue
			}
			p.errorf("unknown field %q%s", f, suggest(f, withParallelismGuess(f, known)))
		}
	}

	// Missing and defaulted fields.
	if !seen["QueryName"] {
		p.errorf("missing required field \"QueryName\"")
	}
	if !seen["Experiment"] {
		in.Name = strings.TrimSuffix(filepath.Base(p.file), filepath.Ext(p.file))
		if p.file == "" {
			in.Name = in.QueryName
		}
	}
	if len(in.KafkaBrokers) == 0 && in.Params["KafkaIPs"] != "" {
		for _, ip := range strings.Split(in.Params["KafkaIPs"], ",") {
			if _, _, err := net.SplitHostPort(ip); err != nil {
				ip = net.JoinHostPort(ip, DefaultKafkaPort)
			}
			in.KafkaBrokers = append(in.KafkaBrokers, ip)
		}
	}

	// The artifact's names, then its deployment and source fields.
	p.resolveQueryName(&in, seen)
	p.resolveParallelism(&in, parallelismFrom)
	p.resolveReconfigTargets(in.QueryName, reconfigs, reconfigMeta)
	p.artifactFields(&in, seen)
	p.artifactExtras(&in, seen, len(reconfigs) > 0)
	p.resolveAutoscaler(&in, seen)

	// Cross-field checks, in a fixed order.
	for _, op := range sortedKeys(parallelismFrom) {
		if v := in.Parallelism[op]; v > in.NumBuckets {
			p.errorf("%s: %d is out of range (must be between 1 and NumBuckets (%d))", where(parallelismFrom[op], ""), v, in.NumBuckets)
		}
	}
	if len(in.Workers) > 0 && in.MinWorkers > len(in.Workers) {
		p.errorf("%s: %d is out of range (must be at most the number of Workers (%d))", where("MinWorkers", ""), in.MinWorkers, len(in.Workers))
	}
	for _, id := range in.ProducerWorkers {
		if slices.Contains(in.Workers, id) {
			p.errorf("%s: %q is also in Workers (a producer worker hosts no task; allowed: worker ids not in Workers)", where("ProducerWorkers", ""), id)
		}
	}
	var late []int // indices into reconfigs of the artifact's never-fired entries
	for i, r := range reconfigs {
		loc := fmt.Sprintf("Reconfigurations[%d]", reconfigMeta[i].index)
		if r.TriggerTimeSeconds >= in.TotalRuntimeSeconds {
			if p.artifact {
				// The artifact's runExperiment.py triggers reconfigurations
				// while the run lasts; one due at or after its end never
				// fires, and some of its configs keep such entries.
				p.notef("%s: %d s is not before the run's end (TotalRuntimeSeconds %d); as in the artifact, it never fires and is left out", where("TriggerTimeSeconds", loc), r.TriggerTimeSeconds, in.TotalRuntimeSeconds)
				late = append(late, i)
				continue
			}
			p.errorf("%s: %d is out of range (must be less than TotalRuntimeSeconds (%d))", where("TriggerTimeSeconds", loc), r.TriggerTimeSeconds, in.TotalRuntimeSeconds)
		}
		if r.TargetParallelism > in.NumBuckets {
			p.errorf("%s: %d is out of range (must be between 1 and NumBuckets (%d))", where(reconfigMeta[i].target, loc), r.TargetParallelism, in.NumBuckets)
		}
		if r.Type == plan.KindRebalance {
			switch {
			// Without "BucketLoad" the plan step measures each bucket's
			// input on the running tasks at the trigger (activities.Plan).
			case len(r.BucketLoad) > 0 && len(r.BucketLoad) != in.NumBuckets:
				p.errorf("%s: has %d entries, NumBuckets is %d", where("BucketLoad", loc), len(r.BucketLoad), in.NumBuckets)
			}
		}
	}
	for j := len(late) - 1; j >= 0; j-- {
		reconfigs = slices.Delete(reconfigs, late[j], late[j]+1)
	}
	// A task migration is two reconfigurations with the same spec (see
	// workflows.KindTaskMigration); the second queues behind the first.
	for i := 0; i < len(reconfigs); i++ {
		if reconfigs[i].Type == plan.KindTaskMigration {
			reconfigs = slices.Insert(reconfigs, i+1, reconfigs[i])
			i++
		}
	}
	slices.SortStableFunc(reconfigs, func(a, b workflows.ReconfigSpec) int { return a.TriggerTimeSeconds - b.TriggerTimeSeconds })
	p.checkDirections(reconfigs, in.Parallelism)
	p.clearKeptParallelism(reconfigs, in.Parallelism)
	if gotReconfigs {
		in.Reconfigurations = reconfigs
	}
	return in
}
