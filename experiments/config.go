package experiments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"koala/dataplane"
	"koala/dataplane/control"
	"koala/workflows"
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
	DefaultGenerator           = "keys"
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
	p := &parser{file: name}
	in := p.parse(data)
	if len(p.errs) > 0 {
		return workflows.ExperimentInput{}, errors.Join(p.errs...)
	}
	return in, nil
}

// member is one "name": value pair of a JSON object.
type member struct {
	name string
	raw  json.RawMessage
}

type parser struct {
	file string
	errs []error
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

// Top-level field kinds handled generically: the value is validated and
// stored in Params under the field's name.
type knobKind int

const (
	knobString  knobKind = iota // non-empty string
	knobInt                     // whole number ≥ min
	knobBool                    // true or false
	knobStrings                 // list of non-empty strings (stored comma-joined)
	knobRaw                     // any JSON (stored compact)
	knobNested                  // JSON object or array (stored compact)
	knobScalar                  // number or string (stored as written)
	knobEnum                    // one of values
)

// knobRateLimiter is dataplane.ParseRateLimiterConfig's object (stored compact).
const knobRateLimiter = knobEnum + 1

type knob struct {
	kind   knobKind
	min    int64
	values []string
}

// artifactKnobs are the artifact's fields that only some protocols or
// generators read; they are passed through in Params.
var artifactKnobs = map[string]knob{
	"LazyProtocolVersion":                  {kind: knobString},
	"LazyByKeyCancellingTaskMigrationMode": {kind: knobEnum, values: []string{"fetch-on-demand", "eventual"}},
	"LazyByKeyGradualMigrationBatchSize":   {kind: knobInt, min: -1},
	"BufferSize":                           {kind: knobInt, min: 1},
	"RateLimiterConfig":                    {kind: knobRateLimiter},
	"NexmarkLogicalSourceConfigs":          {kind: knobRaw},
	"DummyFieldSize":                       {kind: knobInt, min: 0},
	"WindowDuration":                       {kind: knobScalar},
	"MaxOutOfOrdernessMs":                  {kind: knobInt, min: 0},
	"SourceIdleTimeoutMs":                  {kind: knobInt, min: 0},
	"IsWarmUp":                             {kind: knobBool},
	"LoadWarmUpData":                       {kind: knobBool},
	"StateMigrationChunkSize":              {kind: knobInt, min: 1},
	"NumSubscales":                         {kind: knobInt, min: 1},
	"RemotePebbleAddrs":                    {kind: knobStrings},
	"NumEvents":                            {kind: knobInt, min: 0},
	"OutputEventNumber":                    {kind: knobInt, min: 0},
	"Hosts":                                {kind: knobRaw},
	"WorkerIPs":                            {kind: knobStrings},
	"KafkaIPs":                             {kind: knobStrings},
	"CoordinatorIP":                        {kind: knobString},
}

// Fields with their own handling (see parse).
var topFields = []string{
	"QueryName", "Experiment", "TotalRuntimeSeconds", "Reconfigurations",
	"ReconfigProtocol", "StateBackendType", "NumBuckets", "BatchSize",
	"NumPartitions", "RatePerSecond", "NumKeys", "Seed", "ValueSize",
	"Generator", "Skew", "NumProducers", "MinWorkers", "Workers",
	"DrainTimeoutSeconds", "KafkaBrokers",
}

// reconfigFields are the canonical names inside a Reconfigurations entry;
// "TargetParallelism" is accepted as an alias of the artifact's spelling.
// Which of them an entry needs depends on its type (see requiredFields).
var reconfigFields = []string{"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism", "BucketLoad", "TaskID", "TargetWorker"}

// requiredFields and allowedFields per kind. A rebalance without
// "BucketLoad" plans from the load the declared generator implies (see
// parse); a task-migration's operator follows from its "TaskID".
var (
	requiredFields = map[string][]string{
		workflows.KindScaleUp:       {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism"},
		workflows.KindScaleDown:     {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism"},
		workflows.KindRebalance:     {"TriggerTimeSeconds", "Type", "TargetOperator"},
		workflows.KindTaskMigration: {"TriggerTimeSeconds", "Type", "TaskID", "TargetWorker"},
	}
	allowedFields = map[string][]string{
		workflows.KindScaleUp:       {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism", targetAlias},
		workflows.KindScaleDown:     {"TriggerTimeSeconds", "Type", "TargetOperator", "TargetParrallelism", targetAlias},
		workflows.KindRebalance:     {"TriggerTimeSeconds", "Type", "TargetOperator", "BucketLoad"},
		workflows.KindTaskMigration: {"TriggerTimeSeconds", "Type", "TargetOperator", "TaskID", "TargetWorker"},
	}
)

const targetAlias = "TargetParallelism"

var parallelismField = regexp.MustCompile(`^[A-Za-z0-9]+Parallelism$`)

// reconfigTypes maps accepted "Type" values to koala's kinds; "" marks
// kinds that are recognised but not supported yet.
var reconfigTypes = map[string]string{
	"scaleup":        workflows.KindScaleUp,
	"scale-up":       workflows.KindScaleUp,
	"scale-out":      workflows.KindScaleUp,
	"scaleout":       workflows.KindScaleUp,
	"scaledown":      workflows.KindScaleDown,
	"scale-down":     workflows.KindScaleDown,
	"scale-in":       workflows.KindScaleDown,
	"scalein":        workflows.KindScaleDown,
	"rebalance":      workflows.KindRebalance,
	"task-migration": workflows.KindTaskMigration,
}

// supportedTypes lists the accepted "Type" values that are implemented.
func supportedTypes() []string {
	var out []string
	for _, t := range sortedKeys(reconfigTypes) {
		if reconfigTypes[t] != "" {
			out = append(out, t)
		}
	}
	return out
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
				p.errorf("%s: expected a number between 0 and 10 (the Zipf exponent of the \"zipf\" generator), got %s", at, compact(raw))
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
		case "DrainTimeoutSeconds":
			p.intTo(&in.DrainTimeoutSeconds, raw, at, 1, math.MaxInt32)
		case "KafkaBrokers":
			if v, ok := p.strs(raw, at, false); ok {
				in.KafkaBrokers = v
			}
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

	// Cross-field checks, in a fixed order.
	for _, op := range sortedKeys(parallelismFrom) {
		if v := in.Parallelism[op]; v > in.NumBuckets {
			p.errorf("%s: %d is out of range (must be between 1 and NumBuckets (%d))", where(parallelismFrom[op], ""), v, in.NumBuckets)
		}
	}
	if len(in.Workers) > 0 && in.MinWorkers > len(in.Workers) {
		p.errorf("%s: %d is out of range (must be at most the number of Workers (%d))", where("MinWorkers", ""), in.MinWorkers, len(in.Workers))
	}
	for i, r := range reconfigs {
		loc := fmt.Sprintf("Reconfigurations[%d]", reconfigMeta[i].index)
		if r.TriggerTimeSeconds >= in.TotalRuntimeSeconds {
			p.errorf("%s: %d is out of range (must be less than TotalRuntimeSeconds (%d))", where("TriggerTimeSeconds", loc), r.TriggerTimeSeconds, in.TotalRuntimeSeconds)
		}
		if r.TargetParallelism > in.NumBuckets {
			p.errorf("%s: %d is out of range (must be between 1 and NumBuckets (%d))", where(reconfigMeta[i].target, loc), r.TargetParallelism, in.NumBuckets)
		}
		if r.Type == workflows.KindRebalance {
			switch {
			case len(r.BucketLoad) > 0 && len(r.BucketLoad) != in.NumBuckets:
				p.errorf("%s: has %d entries, NumBuckets is %d", where("BucketLoad", loc), len(r.BucketLoad), in.NumBuckets)
			case len(r.BucketLoad) == 0:
				// Plan from the load the declared key distribution implies.
				skew := in.Producer.Skew
				switch in.Producer.Generator {
				case dataplane.ZipfGenerator:
				case DefaultGenerator, "":
					skew = 0
				default:
					p.errorf("%s: rebalance without \"BucketLoad\" plans from the declared key distribution, which generator %q does not have (use %q or %q, or give \"BucketLoad\")", loc, in.Producer.Generator, dataplane.ZipfGenerator, DefaultGenerator)
					continue
				}
				z, err := dataplane.NewZipfKeys(in.Producer.NumKeys, skew)
				if err != nil {
					p.errorf("%s: %v", loc, err)
					continue
				}
				reconfigs[i].BucketLoad = z.BucketLoad(in.NumBuckets)
			}
		}
	}
	// A task migration is two reconfigurations with the same spec (see
	// workflows.KindTaskMigration); the second queues behind the first.
	for i := 0; i < len(reconfigs); i++ {
		if reconfigs[i].Type == workflows.KindTaskMigration {
			reconfigs = slices.Insert(reconfigs, i+1, reconfigs[i])
			i++
		}
	}
	slices.SortStableFunc(reconfigs, func(a, b workflows.ReconfigSpec) int { return a.TriggerTimeSeconds - b.TriggerTimeSeconds })
	p.checkDirections(reconfigs, in.Parallelism)
	if gotReconfigs {
		in.Reconfigurations = reconfigs
	}
	return in
}

// checkDirections follows each operator's parallelism through the
// reconfigurations (sorted by time) when its initial parallelism is known,
// and rejects a scale-up that does not increase it or a scale-down that does
// not decrease it.
func (p *parser) checkDirections(reconfigs []workflows.ReconfigSpec, initial map[string]int) {
	cur := maps.Clone(initial)
	for _, r := range reconfigs {
		was, ok := cur[r.TargetOperator]
		if !ok || r.TargetParallelism < 1 || r.Type == "" {
			continue
		}
		switch {
		case r.Type == workflows.KindScaleUp && r.TargetParallelism <= was:
			p.errorf("reconfiguration at %d s: %q of operator %q to parallelism %d does not increase it (it is %d then)", r.TriggerTimeSeconds, r.Type, r.TargetOperator, r.TargetParallelism, was)
		case r.Type == workflows.KindScaleDown && r.TargetParallelism >= was:
			p.errorf("reconfiguration at %d s: %q of operator %q to parallelism %d does not decrease it (it is %d then)", r.TriggerTimeSeconds, r.Type, r.TargetOperator, r.TargetParallelism, was)
		}
		cur[r.TargetOperator] = r.TargetParallelism
	}
}

// entryMeta says where a parsed Reconfigurations entry came from.
type entryMeta struct {
	index  int    // position in the config's array
	target string // spelling of its target parallelism field
}

// reconfigurations parses the "Reconfigurations" array. Entries that are
// not objects are skipped (after reporting them); meta[i] describes out[i].
func (p *parser) reconfigurations(raw json.RawMessage) (out []workflows.ReconfigSpec, meta []entryMeta) {
	at := where("Reconfigurations", "")
	if k := kindOf(raw); k != "array" {
		p.errorf("%s: expected an array of objects, got %s", at, k)
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.errorf("%s: %v", at, err)
		return nil, nil
	}
	out = make([]workflows.ReconfigSpec, 0, len(items))
	for i, item := range items {
		loc := fmt.Sprintf("Reconfigurations[%d]", i)
		if k := kindOf(item); k != "object" {
			p.errorf("%s: expected an object, got %s", loc, k)
			continue
		}
		members, err := objectMembers(item)
		if err != nil {
			p.errorf("%s: %v", loc, err)
			continue
		}
		slices.SortStableFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
		var r workflows.ReconfigSpec
		seen := map[string]bool{}
		for _, m := range members {
			at := where(m.name, loc)
			if seen[m.name] {
				p.errorf("%s appears more than once", at)
				continue
			}
			seen[m.name] = true
			switch m.name {
			case "TriggerTimeSeconds":
				p.intTo(&r.TriggerTimeSeconds, m.raw, at, 0, math.MaxInt32)
			case "Type":
				typ, ok := p.str(m.raw, at)
				if !ok {
					break
				}
				kind, known := reconfigTypes[typ]
				switch {
				case !known:
					p.errorf("%s: unknown type %q (allowed: %s)", at, typ, strings.Join(supportedTypes(), ", "))
				default:
					r.Type = kind
				}
			case "TargetOperator":
				r.TargetOperator, _ = p.str(m.raw, at)
			case "TargetParrallelism", targetAlias:
				p.intTo(&r.TargetParallelism, m.raw, at, 1, math.MaxInt32)
			case "TaskID":
				r.TaskID, _ = p.str(m.raw, at)
			case "TargetWorker":
				r.TargetWorker, _ = p.str(m.raw, at)
			case "BucketLoad":
				if err := json.Unmarshal(m.raw, &r.BucketLoad); err != nil || len(r.BucketLoad) == 0 {
					p.errorf("%s: expected a non-empty array of numbers ≥ 0 (one per bucket), got %s", at, compact(m.raw))
					r.BucketLoad = nil
					break
				}
				for b, l := range r.BucketLoad {
					if l < 0 {
						p.errorf("%s: entry %d is %v, loads must be ≥ 0", at, b, l)
					}
				}
			default:
				p.errorf("unknown field %q in %s%s", m.name, loc, suggest(m.name, reconfigFields))
			}
		}
		if seen["TargetParrallelism"] && seen[targetAlias] {
			p.errorf("%s: both \"TargetParrallelism\" and %q are given; use one", loc, targetAlias)
		}
		required, allowed := requiredFields[r.Type], allowedFields[r.Type]
		if r.Type == "" { // bad or missing type, reported above
			required, allowed = []string{"TriggerTimeSeconds", "Type"}, append(slices.Clone(reconfigFields), targetAlias)
		}
		for _, f := range required {
			if !seen[f] && !(f == "TargetParrallelism" && seen[targetAlias]) {
				p.errorf("%s: missing required field %q", loc, f)
			}
		}
		for _, m := range members {
			if slices.Contains(reconfigFields, m.name) || m.name == targetAlias {
				if !slices.Contains(allowed, m.name) {
					p.errorf("%s: field %q does not apply to type %q (fields of that type: %s)", loc, m.name, r.Type, strings.Join(allowed, ", "))
				}
			}
		}
		name := "TargetParrallelism"
		if seen[targetAlias] && !seen[name] {
			name = targetAlias
		}
		out = append(out, r)
		meta = append(meta, entryMeta{index: i, target: name})
	}
	return out, meta
}

// knob validates a pass-through field and renders it for Params.
func (p *parser) knob(k knob, raw json.RawMessage, at string) (string, bool) {
	switch k.kind {
	case knobString:
		return p.str(raw, at)
	case knobEnum:
		var v string
		ok := p.enumTo(&v, raw, at, k.values)
		return v, ok
	case knobInt:
		v, ok := p.integer(raw, at, k.min, math.MaxInt64)
		return strconv.FormatInt(v, 10), ok
	case knobBool:
		if kd := kindOf(raw); kd != "boolean" {
			p.errorf("%s: expected true or false, got %s", at, kd)
			return "", false
		}
		return strings.TrimSpace(string(raw)), true
	case knobStrings:
		v, ok := p.strs(raw, at, false)
		return strings.Join(v, ","), ok
	case knobNested:
		if kd := kindOf(raw); kd != "object" && kd != "array" {
			p.errorf("%s: expected an object or an array, got %s", at, kd)
			return "", false
		}
		return compact(raw), true
	case knobRateLimiter:
		if _, err := dataplane.ParseRateLimiterConfig(raw); err != nil {
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap()
			}
			for _, e := range errs {
				p.errorf("%s: %v", at, e)
			}
			return "", false
		}
		return compact(raw), true
	case knobScalar:
		switch kindOf(raw) {
		case "number":
			return strings.TrimSpace(string(raw)), true
		case "string":
			return p.str(raw, at)
		}
		p.errorf("%s: expected a number or a string, got %s", at, kindOf(raw))
		return "", false
	default: // knobRaw
		return compact(raw), true
	}
}

func (p *parser) str(raw json.RawMessage, at string) (string, bool) {
	if k := kindOf(raw); k != "string" {
		p.errorf("%s: expected a string, got %s", at, k)
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.errorf("%s: %v", at, err)
		return "", false
	}
	if strings.TrimSpace(s) == "" {
		p.errorf("%s: must not be empty", at)
		return "", false
	}
	return s, true
}

// strs parses a list of non-empty strings; unique also rejects repeats.
func (p *parser) strs(raw json.RawMessage, at string, unique bool) ([]string, bool) {
	if k := kindOf(raw); k != "array" {
		p.errorf("%s: expected an array of strings, got %s", at, k)
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		p.errorf("%s: %v", at, err)
		return nil, false
	}
	out := make([]string, 0, len(items))
	ok := true
	for i, item := range items {
		s, good := p.str(item, fmt.Sprintf("%s[%d]", at, i))
		if !good {
			ok = false
			continue
		}
		if unique && slices.Contains(out, s) {
			p.errorf("%s: %q is listed twice", at, s)
			ok = false
			continue
		}
		out = append(out, s)
	}
	return out, ok
}

func (p *parser) enumTo(dst *string, raw json.RawMessage, at string, allowed []string) bool {
	s, ok := p.str(raw, at)
	if !ok {
		return false
	}
	if !slices.Contains(allowed, s) {
		p.errorf("%s: unknown value %q (allowed: %s)", at, s, strings.Join(allowed, ", "))
		return false
	}
	*dst = s
	return true
}

func (p *parser) intTo(dst *int, raw json.RawMessage, at string, lo, hi int64) bool {
	v, ok := p.integer(raw, at, lo, hi)
	if ok {
		*dst = int(v)
	}
	return ok
}

// integer parses a whole JSON number within [lo, hi].
func (p *parser) integer(raw json.RawMessage, at string, lo, hi int64) (int64, bool) {
	if k := kindOf(raw); k != "number" {
		p.errorf("%s: expected a number, got %s", at, k)
		return 0, false
	}
	text := strings.TrimSpace(string(raw))
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(text, 64)
		switch {
		case ferr == nil && f != math.Trunc(f):
			p.errorf("%s: expected a whole number, got %s", at, text)
			return 0, false
		case ferr == nil && f >= math.MinInt64 && f < math.MaxInt64:
			v = int64(f) // e.g. 1e3 or 90.0
		default:
			p.errorf("%s: %s is out of range (%s)", at, text, rangeText(lo, hi))
			return 0, false
		}
	}
	if v < lo || v > hi {
		p.errorf("%s: %s is out of range (%s)", at, text, rangeText(lo, hi))
		return 0, false
	}
	return v, true
}

func rangeText(lo, hi int64) string {
	switch {
	case lo == math.MinInt64:
		return "must be a 64-bit integer"
	case hi >= math.MaxInt32:
		return fmt.Sprintf("must be at least %d", lo)
	default:
		return fmt.Sprintf("must be between %d and %d", lo, hi)
	}
}

// objectMembers decodes a JSON object into its members in source order,
// keeping repeated names, and rejects anything after the closing brace.
func objectMembers(data []byte) ([]member, error) {
	if k := kindOf(data); k != "object" {
		if k == "" {
			return nil, errors.New("empty file: expected a JSON object")
		}
		if !json.Valid(data) {
			return nil, syntaxError(data)
		}
		return nil, fmt.Errorf("expected a JSON object at the top level, got %s", k)
	}
	if !json.Valid(data) {
		return nil, syntaxError(data)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, err
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, member{name: tok.(string), raw: raw})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the top-level object")
	}
	return out, nil
}

// syntaxError locates a JSON syntax error by line and column.
func syntaxError(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		before := data[:min(int(se.Offset), len(data))]
		line := bytes.Count(before, []byte("\n")) + 1
		col := len(before) - 1 - bytes.LastIndexByte(before, '\n') // the offending byte, 1-based
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, se)
	}
	if err == nil {
		return errors.New("invalid JSON")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// kindOf names the JSON type of raw ("" when raw is blank).
func kindOf(raw []byte) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return ""
	}
	switch s[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func compact(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// suggest renders ` (did you mean "X"?)` for the known name nearest to name
// (case-insensitive Levenshtein distance), when it is close enough.
func suggest(name string, known []string) string {
	best, bestD := "", math.MaxInt
	for _, k := range known {
		if d := levenshtein(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" || bestD > max(2, len([]rune(name))/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// withParallelismGuess adds "<Prefix>Parallelism" to the candidates when name
// looks like a misspelt per-operator parallelism field.
func withParallelismGuess(name string, known []string) []string {
	i := strings.Index(strings.ToLower(name), "paral")
	if i <= 0 {
		return known
	}
	return append(slices.Clone(known), name[:i]+"Parallelism")
}

// levenshtein is the edit distance between a and b (insertions, deletions
// and substitutions of runes, each costing 1).
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
