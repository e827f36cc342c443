package experiments

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"koala/dataplane/control"
	"koala/queries"
	"koala/workflows/plan"
)

// Top-level field kinds handled generically: the value is validated and
// stored in Params under the field's name.
type knobKind int

const (
	knobString      knobKind = iota // non-empty string
	knobInt                         // whole number ≥ min (and ≤ max if set)
	knobBool                        // true or false
	knobStrings                     // list of non-empty strings (stored comma-joined)
	knobRaw                         // any JSON (stored compact)
	knobNested                      // JSON object or array (stored compact)
	knobScalar                      // number or string (stored as written)
	knobEnum                        // one of values
	knobRateLimiter                 // the artifact's RateLimiterConfig (config_ratelimit.go; stored as koala's schedule)
	knobDuration                    // a Go duration string such as "100ms" (stored as written)
)

type knob struct {
	kind     knobKind
	min, max int64 // knobInt's range; max 0: none
	values   []string
}

// artifactKnobs are the artifact's fields that only some protocols or
// generators read; they are passed through in Params.
var artifactKnobs = map[string]knob{
	"LazyProtocolVersion":                  {kind: knobString},
	"LazyByKeyCancellingTaskMigrationMode": {kind: knobEnum, values: []string{"fetch-on-demand", "eventual"}},
	"LazyByKeyGradualMigrationBatchSize":   {kind: knobInt, min: -1},
	"BufferSize":                           {kind: knobInt, min: 1},
	"RateLimiterConfig":                    {kind: knobRateLimiter},
	"NexmarkLogicalSourceConfigs":          {kind: knobNested},
	"NumActivePeople":                      {kind: knobInt, min: 1},
	"HotSellersRatio":                      {kind: knobInt, min: 1},
	"HotAuctionsRatio":                     {kind: knobInt, min: 1},
	"HotBiddersRatio":                      {kind: knobInt, min: 1},
	"WorkDir":                              {kind: knobString},                        // the artifact's directory on its hosts; kept and noted, not used
	"WarmUpDataFolder":                     {kind: knobNested},                        // {"Pebble": dir}: the warm-up snapshot (config_warmup.go)
	"LookupTableWarmUpDataFolder":          {kind: knobString},                        // the artifact's key lookup table beside it (config_warmup.go)
	"EventType":                            {kind: knobEnum, values: traceEventTypes}, // the artifact's file-reader producer: which trace (config_extras.go)
	"MaxAllowedDelay":                      {kind: knobDuration},
	"WatermarkInterval":                    {kind: knobDuration},
	"WindowSlide":                          {kind: knobDuration},
	"NewUserPeriod":                        {kind: knobDuration},
	control.ParamListStateSize:             {kind: knobInt, min: 1, max: control.MaxListSize}, // entries per key the azure/borg lists keep (queries/traces)
	control.ParamListLength:                {kind: knobInt, min: 1, max: control.MaxListSize}, // trips per route taxi's list keeps (queries/traces)
	"UseDummyField":                        {kind: knobBool},
	"EnablePendingBatchTimeout":            {kind: knobBool},
	"AllNodeIPs":                           {kind: knobStrings},
	"KafkaClusterIPs":                      {kind: knobStrings},
	"ProducerIPs":                          {kind: knobStrings},
	"InitialCustomTaskPlacement":           {kind: knobStrings},
	"PartitionPolicy":                      {kind: knobEnum, values: partitionPolicies},
	"PebbleEnableConcurrentGetMany":        {kind: knobBool},
	"PebbleGetManyMaxConcurrency":          {kind: knobInt, min: 1},
	"PebbleGetManyBatchSize":               {kind: knobInt, min: 1},
	"DummyFieldSize":                       {kind: knobInt, min: 0},
	"WindowDuration":                       {kind: knobScalar},
	"MaxOutOfOrdernessMs":                  {kind: knobInt, min: 0},
	"SourceIdleTimeoutMs":                  {kind: knobInt, min: 0},
	control.ParamSourceOutageGrace:         {kind: knobInt, min: 0},
	"IsWarmUp":                             {kind: knobBool},
	"LoadWarmUpData":                       {kind: knobBool},
	"WarmUpSnapshotDir":                    {kind: knobString},
	control.ParamStateMigrationChunkSize:   {kind: knobInt, min: 1, max: control.MaxStateMigrationChunkSize},
	control.ParamSyntheticCost:             {kind: knobString}, // "counter=250us": a per-record wait (dataplane/control/synthetic_cost.go)
	"NumSubscales":                         {kind: knobInt, min: 1},
	"RemotePebbleAddrs":                    {kind: knobStrings},
	"NumEvents":                            {kind: knobInt, min: 0},
	"FilePath":                             {kind: knobStrings}, // trace CSV files a trace generator replays
	"OutputEventNumber":                    {kind: knobInt, min: 0},
	"NexmarkSellers":                       {kind: knobEnum, values: []string{"sequential", "uniform", "zipf"}}, // closing-auction stream (queries/nexmark generator_sellers.go)
	"Hosts":                                {kind: knobRaw},
	"WorkerIPs":                            {kind: knobStrings},
	"KafkaIPs":                             {kind: knobStrings},
	"CoordinatorIP":                        {kind: knobString},
	"ReportSinkValues":                     {kind: knobBool}, // collecting sinks' per-key values in the result (control.ParamReportSinkValues)
	// koala's own job parameters (read by the plan and the data plane).
	control.ParamSinkKind:             {kind: knobEnum, values: queries.SinkKinds}, // the query's runtime sinks, or a Kafka sink (queries/sink_kind.go)
	control.ParamKafkaSinkTopic:       {kind: knobString},                          // the Kafka sink's topic (default "<job topic>-<sink operator>")
	control.ParamKafkaSinkBrokers:     {kind: knobStrings},                         // the Kafka sink's brokers (default: the job's)
	control.ParamTaskPlacement:        {kind: knobEnum, values: plan.TaskPlacements},
	control.ParamSourceFetchMinBytes:  {kind: knobInt, min: 1},
	control.ParamSourceFetchMaxWaitMs: {kind: knobInt, min: 1},

	// The source's read-ahead bound (dataplane/source_credit.go).
	control.ParamSourceMaxInFlightRecords: {kind: knobInt, min: 1, max: control.MaxSourceMaxInFlightRecords},
	// The records a task's inbox holds (dataplane/worker.go deliverLocal).
	control.ParamTaskInboxMaxRecords: {kind: knobInt, min: 1, max: control.MaxTaskInboxMaxRecords},

	// The lazy protocol's background migration budget per task (dataplane/migrator.go).
	control.ParamMigrationRate: {kind: knobInt, min: control.MinMigrationRate, max: control.MaxMigrationRate},

	control.ParamReconfigHoldBytes: {kind: knobInt, min: control.MinReconfigHoldBytes, max: control.MaxReconfigHoldBytes}, // records held during a reconfiguration before senders wait (dataplane/route_hold.go)
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
		hi := int64(math.MaxInt64)
		if k.max != 0 {
			hi = k.max
		}
		v, ok := p.integer(raw, at, k.min, hi)
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
	case knobRateLimiter:
		s, use, ok := p.rateLimiterOf(raw, at)
		if ok && !use {
			// Not stored: the producers run at RatePerSecond (a
			// warm-up's without one as fast as they can: warmUpRate).
			p.notef("%s: UseRateLimit is false (the artifact's producers then generate as fast as they can); here they run at RatePerSecond, a warm-up's as fast as they can", at)
			return "", false
		}
		return scheduleJSON(s), ok
	case knobDuration:
		d, ok := p.str(raw, at)
		if !ok {
			return "", false
		}
		if v, err := time.ParseDuration(d); err != nil || v < 0 {
			p.errorf("%s: %q is not a duration (allowed: a Go duration ≥ 0 such as \"100ms\" or \"10s\")", at, d)
			return "", false
		}
		return d, true
	case knobNested:
		if kd := kindOf(raw); kd != "object" && kd != "array" {
			p.errorf("%s: expected an object or an array, got %s", at, kd)
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
	case hi == math.MaxInt32 || hi == math.MaxInt64: // the "no upper bound" of an int or int64 field
		return fmt.Sprintf("must be at least %d", lo)
	default:
		return fmt.Sprintf("must be between %d and %d", lo, hi)
	}
}
