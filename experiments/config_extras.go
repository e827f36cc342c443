package experiments

import (
	"math"
	"strconv"
	"strings"
	"time"

	"koala/dataplane/control"
	"koala/workflows"
)

// The artifact's remaining fields: what each does here.
//
//   - EventType (its file-reader producer's trace: Azure, Borg, Taxi,
//     Twitch) selects that trace's generator, which must fit the query;
//     without it (or a Generator) a trace query gets its own trace's
//     generator, since the default key generator's records are not the
//     trace's schema;
//   - LazyProtocolVersion "drrs" with ReconfigProtocol "lazy" is how the
//     artifact's DRRS branch names DRRS: it runs koala's "drrs" protocol;
//   - MaxAllowedDelay is the sources' allowed out-of-orderness, koala's
//     MaxOutOfOrdernessMs;
//   - ListStateSize (azure, borg) and ListLength (taxi) are how many
//     entries per key the trace queries' list state keeps, job parameters
//     the trace operators read;
//   - WatermarkInterval, WindowSlide, NewUserPeriod, UseDummyField and
//     EnablePendingBatchTimeout are validated, kept in Params and noted:
//     koala's runtime fixes the watermark interval (50 ms), q5's slide is a
//     fifth of its WindowDuration, q8's window is WindowDuration, a pad is
//     there whenever DummyFieldSize is > 0, and tasks send every batch
//     when it is done, so no
//     partial batch waits for a timeout;
//   - WorkDir is noted: every protocol lives in this one tree.

// traceEventTypes are the artifact's file-reader event types.
var traceEventTypes = []string{"Azure", "Borg", "Taxi", "Twitch"}

// traceGenerators are the trace queries and the generators of their
// records (queries/traces registers each under the query's name).
var traceGenerators = map[string]string{"azure": "azure", "borg": "borg", "taxi": "taxi", "twitch": "twitch"}

func (p *parser) artifactExtras(in *workflows.ExperimentInput, seen map[string]bool, rescales bool) {
	p.warmUpFolders(in, seen)
	p.warmUpRate(in, seen)
	p.traceGenerator(in, seen)
	p.traceWarmUp(in, seen)
	if in.Params["PartitionPolicy"] == "uniform" && rescales {
		p.notef("%s: \"uniform\" starts from the same even, contiguous bucket layout as \"consistent-even\"; at a rescale koala moves the fewest buckets (the artifact re-lays every bucket)", where("PartitionPolicy", ""))
	}
	if in.Params["LazyProtocolVersion"] == "drrs" {
		switch in.ReconfigProtocol {
		case workflows.ProtocolLazy:
			in.ReconfigProtocol = workflows.ProtocolDRRS
			p.notef("%s: \"drrs\" with ReconfigProtocol \"lazy\" is the artifact's DRRS; it runs koala's %q protocol", where("LazyProtocolVersion", ""), workflows.ProtocolDRRS)
		case workflows.ProtocolDRRS:
		default:
			p.errorf("%s: \"drrs\" needs ReconfigProtocol \"lazy\" or %q, got %q", where("LazyProtocolVersion", ""), workflows.ProtocolDRRS, in.ReconfigProtocol)
		}
	}
	if d, ok := in.Params["MaxAllowedDelay"]; ok {
		v, _ := time.ParseDuration(d) // validated as a knob
		ms := strconv.FormatInt(v.Milliseconds(), 10)
		if prev, set := in.Params[control.ParamMaxOutOfOrderness]; set && prev != ms {
			p.errorf("%s %q and %s %s disagree (both are the sources' allowed out-of-orderness); give one", where("MaxAllowedDelay", ""), d, where(control.ParamMaxOutOfOrderness, ""), prev)
		} else {
			in.Params[control.ParamMaxOutOfOrderness] = ms
		}
	}
	if d, ok := in.Params["WatermarkInterval"]; ok {
		p.notef("%s %q: koala's sources send a watermark at most every 50 ms (fixed in the runtime)", where("WatermarkInterval", ""), d)
	}
	if d, ok := in.Params["WindowSlide"]; ok {
		p.notef("%s %q: koala's sliding window (q5) slides by a fifth of WindowDuration; WindowSlide is not used", where("WindowSlide", ""), d)
	}
	if d, ok := in.Params["NewUserPeriod"]; ok {
		p.notef("%s %q: koala's q8 joins new people and auctions within WindowDuration; NewUserPeriod is not used", where("NewUserPeriod", ""), d)
	}
	if in.Params["UseDummyField"] == "true" {
		p.notef("%s: not needed here; DummyFieldSize > 0 pads the state by itself (q3's people, q6*, the trace queries)", where("UseDummyField", ""))
	}
	if v, ok := in.Params["EnablePendingBatchTimeout"]; ok {
		p.notef("%s %s: koala's tasks send each batch when it is done, so no partial batch waits for a timeout either way", where("EnablePendingBatchTimeout", ""), v)
	}
	if v, ok := in.Params["WorkDir"]; ok {
		p.notef("%s %q: not used (the artifact's checkout on its hosts; every protocol lives in this one tree here)", where("WorkDir", ""), v)
	}
}

// traceGenerator selects the trace generator of EventType, or of a trace
// query that names no generator.
func (p *parser) traceGenerator(in *workflows.ExperimentInput, seen map[string]bool) {
	own := traceGenerators[in.QueryName]
	et, ok := in.Params["EventType"]
	if !ok {
		if own != "" && !seen["Generator"] {
			in.Producer.Generator = own
			p.notef("%s: query %q reads the %s trace; its generator %q makes the records", where("Generator", ""), in.QueryName, own, own)
		}
		return
	}
	gen := strings.ToLower(et)
	switch {
	case own != gen:
		p.errorf("%s: %q is not the trace query %q reads (allowed: the query's own trace, %s)", where("EventType", ""), et, in.QueryName, orNone(own))
	case seen["Generator"] && in.Producer.Generator != gen:
		p.errorf("%s: %q, but EventType %q needs generator %q", where("Generator", ""), in.Producer.Generator, et, gen)
	default:
		in.Producer.Generator = gen
	}
}

// traceWarmUp makes a synthetic trace's warm-up stream sequential, the
// artifact's warm-up rule (one new key per event): its NumEvents records
// per producer touch NumEvents × producers keys once each, and the keyed
// operators fill each key's window at its first record (queries/traces
// warmUpFill). Without it a warm-up would draw its records from the
// measurement's Zipf and build a few hot keys' state many times over.
func (p *parser) traceWarmUp(in *workflows.ExperimentInput, seen map[string]bool) {
	if in.Params[control.ParamIsWarmUp] != "true" || in.Params["FilePath"] != "" || traceGenerators[in.QueryName] == "" ||
		in.Producer.Generator != traceGenerators[in.QueryName] {
		return
	}
	n, err := strconv.ParseInt(in.Params[control.ParamNumEvents], 10, 64)
	if err != nil || n < 1 {
		return // the warm-up's own check names NumEvents
	}
	in.Producer.Sequential = true
	keys := n * int64(max(in.Producer.Producers, 1))
	if seen["NumKeys"] {
		if int64(in.Producer.NumKeys) < keys {
			p.notef("%s %d: the warm-up's %d records go round its %d keys", where("NumKeys", ""), in.Producer.NumKeys, keys, in.Producer.NumKeys)
		}
		return
	}
	if keys > math.MaxInt32 {
		p.errorf("%s: %d × %d producers is more keys than a trace generator has (at most %d)", where(control.ParamNumEvents, ""), n, in.Producer.Producers, math.MaxInt32)
		return
	}
	in.Producer.NumKeys = int(keys)
	p.notef("%s: this %s warm-up makes one new key per record (key index = record number, %d keys) and fills each key's state at its first record", where(control.ParamNumEvents, ""), in.QueryName, keys)
}

func orNone(s string) string {
	if s == "" {
		return "none: the query reads no trace"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
