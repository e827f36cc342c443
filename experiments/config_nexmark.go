package experiments

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/queries/nexmark"
	"koala/workflows"
)

// Nexmark sources
//
// The artifact runs one producer per NexmarkLogicalSourceConfigs entry and
// event type, each with its own NexmarkSourceConfig; koala's "nexmark"
// generator makes one stream of the selected event types in the
// reference 1:3:46 person:auction:bid mix (or, for ClosedAuction, the
// closed-auction stream of its own). The entries are merged into that one
// stream:
//
//   - counts are per event type and per producer in the artifact
//     (NumEvents, OutputEventNumber): a count of c events of a type with
//     proportion w in the mix is c/w mix cycles, and the stream's count is
//     those cycles times the selected types' proportions (the largest
//     cycle count of the entries wins; the artifact's configs agree);
//     OutputEventNumber, a per-producer resume point in the artifact, is
//     also multiplied by the number of producers, because koala's warm-up
//     producers split one sequence (workflows/warmup.go);
//   - RateLimiterConfig schedules of the entries are added interval by
//     interval (sumSchedules), since one koala producer emits every type;
//   - the other knobs describe the stream and must agree between entries;
//   - a ClosedAuction source of a query that closes auctions itself
//     (nexmark_query4_modified, run as nexmark_query4) becomes koala's
//     closing-auction stream (nexmark.SellersUniform, or
//     SellersSequential for WarmupRun), in which every auction closes with
//     a winner two events later: its counts and rates are doubled, so the
//     query sees as many closed auctions as the artifact's did.
//
// Knobs the generator reads: NumActivePeople, OutputEventNumber, the event
// types, HotSellerRatio/HotSellerRange/ExtraPayloadSize of the
// ClosedAuction stream, WarmupRun (a ClosedAuction warm-up draws one new
// seller per closed auction, nexmark.SellersSequential) and koala's
// HotSellersRatio/HotAuctionsRatio/HotBiddersRatio (1 in N). The other
// artifact knobs travel in NexmarkSource.Knobs for the generator to take up
// (see its field comment) and a note says that they do not shape the
// stream yet.

// nexmarkEventTypes are the accepted EventType values.
var nexmarkEventTypes = []string{"Person", "Auction", "Bid", "ClosedAuction"}

const closedAuction = "ClosedAuction"

// nexmarkProportion is each reference type's share of a 50-event cycle.
var nexmarkProportion = map[string]int64{"Person": nexmark.PersonProportion, "Auction": nexmark.AuctionProportion, "Bid": nexmark.BidProportion}

// nexmarkKnobs are koala's whole-number Nexmark knobs, accepted at the top
// level and in a NexmarkSourceConfig, with their minimum.
var nexmarkKnobs = map[string]int64{
	"NumActivePeople": 1, "HotSellersRatio": 1, "HotAuctionsRatio": 1, "HotBiddersRatio": 1,
	"NumEvents": 0, "OutputEventNumber": 0,
}

// sourceInts are the artifact's whole-number NexmarkSourceConfig knobs
// beyond nexmarkKnobs, with their minimum.
var sourceInts = map[string]int64{
	"NumActiveAuctions": 1, "NumInFlightEvents": 1, "NumCategories": 1, "ExtraPayloadSize": 0,
	"HotSellerRange": 1, "HotAuctionRange": 1, "HotBidderRange": 1, "HotCategoryRange": 1,
}

// sourceRatios are the artifact's hot-key shares, each in [0, 1].
var sourceRatios = []string{"HotSellerRatio", "HotAuctionRatio", "HotBidderRatio", "HotCategoryRatio"}

// perTypeCounts are the knobs that count one event type's events.
var perTypeCounts = []string{"NumEvents", "OutputEventNumber"}

// logicalSource is one parsed NexmarkLogicalSourceConfigs entry.
type logicalSource struct {
	loc, typ  string
	ints      map[string]int64
	ratios    map[string]float64
	warmupRun bool
	sched     *produce.RateSchedule // nil: no limiter, or UseRateLimit false
	unlimited bool                  // UseRateLimit false
}

func allSourceKnobs() []string {
	return slices.Concat(sortedKeys(nexmarkKnobs), sortedKeys(sourceInts), sourceRatios, []string{"WarmupRun", "RateLimiterConfig"})
}

// nexmarkSources turns NexmarkLogicalSourceConfigs and the top-level
// Nexmark knobs into the producer's generator configuration.
func (p *parser) nexmarkSources(in *workflows.ExperimentInput, seen map[string]bool) {
	var src control.NexmarkSource
	var numEvents int64
	setTop := func(name string, v int64) {
		switch name {
		case "NumActivePeople":
			src.NumActivePeople = int(v)
		case "HotSellersRatio":
			src.HotSellersRatio = int(v)
		case "HotAuctionsRatio":
			src.HotAuctionsRatio = int(v)
		case "HotBiddersRatio":
			src.HotBiddersRatio = int(v)
		case "NumEvents":
			numEvents = v
		case "OutputEventNumber":
			src.OutputEventNumber = v
		}
	}
	topLevel := false
	for _, name := range sortedKeys(nexmarkKnobs) {
		if v, ok := in.Params[name]; ok {
			n, _ := strconv.ParseInt(v, 10, 64) // validated as a knob
			setTop(name, n)
			topLevel = true
		}
	}
	if v := in.Params["NexmarkSellers"]; v != "" {
		src.Sellers = v
		topLevel = true
	}
	const f = "NexmarkLogicalSourceConfigs"
	raw, ok := in.Params[f]
	if !ok && !(topLevel && in.Producer.Generator == nexmark.GeneratorName) {
		return // the knobs are kept in Params for generators that read them
	}
	if ok {
		var items []json.RawMessage
		if err := json.Unmarshal([]byte(raw), &items); err != nil {
			p.errorf("%s: expected an array of objects, got %s", where(f, ""), kindOf([]byte(raw)))
			return
		}
		if len(items) == 0 {
			p.errorf("%s: must name at least one event type", where(f, ""))
		}
		var entries []logicalSource
		for i, item := range items {
			if e, good := p.logicalSource(fmt.Sprintf("%s[%d]", f, i), item); good {
				entries = append(entries, e)
			}
		}
		if n, set := p.mergeSources(in, entries, &src, seen); set {
			numEvents = n
		}
	}
	switch {
	case seen["Generator"] && in.Producer.Generator != nexmark.GeneratorName:
		p.errorf("%s: %q, but the Nexmark fields (%s) need generator %q", where("Generator", ""), in.Producer.Generator, f, nexmark.GeneratorName)
		return
	case src.Sellers != "" && len(src.EventTypes) > 0 && !slices.Equal(src.EventTypes, []string{closedAuction}):
		p.errorf("%s: %q makes its own auction/bid stream; %s cannot select event types from it", where("NexmarkSellers", ""), src.Sellers, f)
		return
	case numEvents > 0 && numEvents < int64(in.Producer.Producers):
		p.errorf("%s: %d is fewer than the %d producers", where("NumEvents", ""), numEvents, in.Producer.Producers)
	}
	in.Producer.Generator = nexmark.GeneratorName
	in.Producer.MaxEvents = numEvents
	in.Producer.Nexmark = &src
}

// logicalSource parses one entry of NexmarkLogicalSourceConfigs.
func (p *parser) logicalSource(loc string, item json.RawMessage) (logicalSource, bool) {
	e := logicalSource{loc: loc, ints: map[string]int64{}, ratios: map[string]float64{}}
	if k := kindOf(item); k != "object" {
		p.errorf("%s: expected an object, got %s", loc, k)
		return e, false
	}
	members, err := objectMembers(item)
	if err != nil {
		p.errorf("%s: %v", loc, err)
		return e, false
	}
	ok := true
	for _, m := range members {
		at := where(m.name, loc)
		switch m.name {
		case "EventType":
			ok = p.enumTo(&e.typ, m.raw, at, nexmarkEventTypes) && ok
		case "NexmarkSourceConfig":
			ok = p.sourceConfig(&e, m.raw, loc+".NexmarkSourceConfig") && ok
		default:
			p.errorf("unknown field %q in %s%s (allowed: EventType, NexmarkSourceConfig)", m.name, loc, suggest(m.name, []string{"EventType", "NexmarkSourceConfig"}))
			ok = false
		}
	}
	if !slices.ContainsFunc(members, func(m member) bool { return m.name == "EventType" }) {
		p.errorf("%s: missing required field \"EventType\" (one of %s)", loc, strings.Join(nexmarkEventTypes, ", "))
		ok = false
	}
	return e, ok
}

// sourceConfig parses one NexmarkSourceConfig object into e.
func (p *parser) sourceConfig(e *logicalSource, raw json.RawMessage, loc string) bool {
	if k := kindOf(raw); k != "object" {
		p.errorf("%s: expected an object, got %s", loc, k)
		return false
	}
	knobs, err := objectMembers(raw)
	if err != nil {
		p.errorf("%s: %v", loc, err)
		return false
	}
	ok := true
	for _, kn := range knobs {
		kat := where(kn.name, loc)
		if lo, isInt := nexmarkKnobs[kn.name]; isInt {
			v, good := p.integer(kn.raw, kat, lo, math.MaxInt64)
			e.ints[kn.name], ok = v, ok && good
			continue
		}
		if lo, isInt := sourceInts[kn.name]; isInt {
			v, good := p.integer(kn.raw, kat, lo, math.MaxInt32)
			e.ints[kn.name], ok = v, ok && good
			continue
		}
		switch {
		case slices.Contains(sourceRatios, kn.name):
			var v float64
			if kindOf(kn.raw) != "number" || json.Unmarshal(kn.raw, &v) != nil || v < 0 || v > 1 {
				p.errorf("%s: %s is out of range (a share of the draws between 0 and 1)", kat, compact(kn.raw))
				ok = false
				continue
			}
			e.ratios[kn.name] = v
		case kn.name == "WarmupRun":
			if kindOf(kn.raw) != "boolean" {
				p.errorf("%s: expected true or false, got %s", kat, kindOf(kn.raw))
				ok = false
				continue
			}
			e.warmupRun = strings.TrimSpace(string(kn.raw)) == "true"
		case kn.name == "RateLimiterConfig":
			s, use, good := p.rateLimiterOf(kn.raw, loc+".RateLimiterConfig")
			ok = ok && good
			if good && use {
				e.sched = &s
			}
			e.unlimited = good && !use
		default:
			p.errorf("unknown field %q in %s%s (allowed: %s)", kn.name, loc, suggest(kn.name, allSourceKnobs()), strings.Join(allSourceKnobs(), ", "))
			ok = false
		}
	}
	return ok
}

// mergeSources merges the entries into src (see the comment at the top).
// It returns the stream's event count per producer when an entry bounds it.
func (p *parser) mergeSources(in *workflows.ExperimentInput, entries []logicalSource, src *control.NexmarkSource, seen map[string]bool) (int64, bool) {
	const f = "NexmarkLogicalSourceConfigs"
	for _, e := range entries {
		if slices.Contains(src.EventTypes, e.typ) {
			p.errorf("%s: event type %q is listed twice", where("EventType", e.loc), e.typ)
			return 0, false
		}
		src.EventTypes = append(src.EventTypes, e.typ)
	}
	closed := slices.Contains(src.EventTypes, closedAuction)
	if closed && len(src.EventTypes) > 1 {
		p.errorf("%s: ClosedAuction is a stream of its own and cannot be mixed with %s (the artifact writes it to a topic of its own)", where(f, ""), strings.Join(slices.DeleteFunc(slices.Clone(src.EventTypes), func(t string) bool { return t == closedAuction }), ", "))
		return 0, false
	}

	// Stream-wide knobs: equal wherever given.
	ints, ratios := map[string]int64{}, map[string]float64{}
	from := map[string]string{}
	for _, e := range entries {
		for _, k := range sortedKeys(e.ints) {
			if slices.Contains(perTypeCounts, k) {
				continue
			}
			if prev, dup := ints[k]; dup && prev != e.ints[k] {
				p.errorf("%s: %d differs from %d given in %s (the producers generate one Nexmark stream)", where(k, e.loc+".NexmarkSourceConfig"), e.ints[k], prev, from[k])
				continue
			}
			ints[k], from[k] = e.ints[k], e.loc
		}
		for _, k := range sortedKeys(e.ratios) {
			if prev, dup := ratios[k]; dup && prev != e.ratios[k] {
				p.errorf("%s: %v differs from %v given in %s (the producers generate one Nexmark stream)", where(k, e.loc+".NexmarkSourceConfig"), e.ratios[k], prev, from[k])
				continue
			}
			ratios[k], from[k] = e.ratios[k], e.loc
		}
	}
	if v, ok := ints["NumActivePeople"]; ok {
		src.NumActivePeople = int(v)
	}
	for name, dst := range map[string]*int{"HotSellersRatio": &src.HotSellersRatio, "HotAuctionsRatio": &src.HotAuctionsRatio, "HotBiddersRatio": &src.HotBiddersRatio} {
		if v, ok := ints[name]; ok {
			*dst = int(v)
		}
	}
	warmupRun := slices.ContainsFunc(entries, func(e logicalSource) bool { return e.warmupRun })
	var carried []string
	carry := func(name string, v float64) {
		if src.Knobs == nil {
			src.Knobs = map[string]float64{}
		}
		src.Knobs[name] = v
		carried = append(carried, name)
	}
	for _, k := range []string{"NumActiveAuctions", "NumInFlightEvents", "NumCategories", "HotAuctionRange", "HotBidderRange", "HotCategoryRange"} {
		if v, ok := ints[k]; ok {
			carry(k, float64(v))
		}
	}
	for _, k := range []string{"HotAuctionRatio", "HotBidderRatio", "HotCategoryRatio"} {
		if v, ok := ratios[k]; ok {
			carry(k, v)
		}
	}
	closing := closed && artifactQueries[in.Params[ParamArtifactQueryName]].closing
	if closing {
		src.EventTypes = nil
	}
	switch {
	case closing:
		if src.Sellers == "" {
			src.Sellers = nexmark.SellersUniform
			if warmupRun {
				src.Sellers = nexmark.SellersSequential
			}
		}
		for _, k := range []string{"HotSellerRatio", "HotSellerRange"} {
			if v, ok := ratios[k]; ok {
				carry(k, v)
			} else if v, ok := ints[k]; ok {
				carry(k, float64(v))
			}
		}
		p.notef("%s: query %q closes its auctions itself, so the ClosedAuction source is koala's closing-auction stream (sellers %q; two events per closed auction, counts and rates doubled)", where(f, ""), in.QueryName, src.Sellers)
	case closed && warmupRun:
		// The artifact's warm-up closed auctions go to one new seller each
		// and draw no hot seller.
		if src.Sellers == "" {
			src.Sellers = nexmark.SellersSequential
		}
		if _, ok := ratios["HotSellerRatio"]; ok {
			p.notef("%s: WarmupRun draws one new seller per closed auction (as the artifact's warm-up does); HotSellerRatio and HotSellerRange are not used", where(f, ""))
		}
	case closed:
		src.HotSellerRatio = ratios["HotSellerRatio"]
		src.HotSellerRange = int(ints["HotSellerRange"])
	default:
		if v, ok := ratios["HotSellerRatio"]; ok {
			carry("HotSellerRatio", v)
		}
		if v, ok := ints["HotSellerRange"]; ok {
			carry("HotSellerRange", float64(v))
		}
		if warmupRun {
			p.notef("%s: WarmupRun changes only the artifact's ClosedAuction stream; the %s stream is generated as always", where(f, ""), strings.Join(src.EventTypes, "/"))
		}
	}
	if v, ok := ints["ExtraPayloadSize"]; ok {
		if closed && !closing {
			src.ExtraPayloadSize = int(v)
		} else {
			carry("ExtraPayloadSize", float64(v))
		}
	}
	if len(carried) > 0 {
		slices.Sort(carried)
		p.notef("%s: %s reach the Nexmark generator with the produce request but do not shape its stream yet", where(f, ""), strings.Join(carried, ", "))
	}

	perClosed := int64(1)
	if closing {
		perClosed = 2
	}
	numEvents, bounded := p.mergeCounts(in, entries, src, closed, perClosed, seen)
	p.mergeRates(in, entries, perClosed, seen)
	return numEvents, bounded
}

// mergeCounts turns the entries' per-type NumEvents and OutputEventNumber
// into the stream's (see the comment at the top).
// perClosed is the stream's events per ClosedAuction event.
func (p *parser) mergeCounts(in *workflows.ExperimentInput, entries []logicalSource, src *control.NexmarkSource, closed bool, perClosed int64, seen map[string]bool) (int64, bool) {
	perCycle := int64(0)
	for _, t := range src.EventTypes {
		perCycle += nexmarkProportion[t]
	}
	// cycles converts a count of type t's events into the stream's.
	stream := func(t string, n int64, roundUp bool) int64 {
		if closed {
			return n * perClosed
		}
		w := nexmarkProportion[t]
		c := n / w
		if roundUp && n%w != 0 {
			c++
		}
		return c * perCycle
	}
	producers := int64(max(in.Producer.Producers, 1))
	var numEvents, resume int64
	var gotEvents, gotResume bool
	for _, e := range entries {
		if n, ok := e.ints["NumEvents"]; ok && n > 0 {
			numEvents, gotEvents = max(numEvents, stream(e.typ, n, true)), true
		}
		if n, ok := e.ints["OutputEventNumber"]; ok {
			resume, gotResume = max(resume, stream(e.typ, n, false)*producers), true
		}
	}
	if gotResume {
		if seen["OutputEventNumber"] {
			p.errorf("%s is given at the top level and in %s; give one", where("OutputEventNumber", ""), "NexmarkLogicalSourceConfigs")
		}
		src.OutputEventNumber = resume
	}
	if !gotEvents {
		return 0, false
	}
	if seen["NumEvents"] {
		p.errorf("%s is given at the top level and in %s; give one", where("NumEvents", ""), "NexmarkLogicalSourceConfigs")
		return 0, false
	}
	// Params' NumEvents is per producer (the warm-up reads it so);
	// MaxEvents is the run's total, split among the producers.
	in.Params["NumEvents"] = strconv.FormatInt(numEvents, 10)
	return numEvents * producers, true
}

// mergeRates adds the entries' rate schedules into the run's
// RateLimiterConfig.
func (p *parser) mergeRates(in *workflows.ExperimentInput, entries []logicalSource, perClosed int64, seen map[string]bool) {
	var scheds []produce.RateSchedule
	var unlimited []string
	for _, e := range entries {
		switch {
		case e.sched != nil:
			scheds = append(scheds, scaleSchedule(*e.sched, float64(perClosed), 1))
		case e.unlimited:
			unlimited = append(unlimited, e.typ)
		}
	}
	if len(scheds) == 0 {
		if len(unlimited) > 0 && in.Params[control.ParamIsWarmUp] != "true" { // a warm-up's rate: warmUpRate
			p.notef("%s: UseRateLimit is false (the artifact's producers then generate as fast as they can); here they run at RatePerSecond (%d events/s in all)", where("NexmarkLogicalSourceConfigs", ""), in.Producer.RatePerSec)
		}
		return
	}
	if seen["RateLimiterConfig"] {
		p.errorf("%s is given at the top level and in NexmarkLogicalSourceConfigs; give one", where("RateLimiterConfig", ""))
		return
	}
	sum := sumSchedules(scheds)
	if len(sum.RateLimit) > produce.MaxRateSteps {
		p.errorf("%s: the event types' schedules add up to %d steps, at most %d are allowed", where("NexmarkLogicalSourceConfigs", ""), len(sum.RateLimit), produce.MaxRateSteps)
		return
	}
	in.Params["RateLimiterConfig"] = scheduleJSON(sum)
	if len(scheds) > 1 || len(unlimited) > 0 {
		note := fmt.Sprintf("the event types' rate schedules add up to %s (one koala producer emits every type)", describeSchedule(sum))
		if len(unlimited) > 0 {
			note += fmt.Sprintf("; %s, unlimited in the artifact, follow that rate in the mix", strings.Join(unlimited, ", "))
		}
		p.notef("%s: %s", where("NexmarkLogicalSourceConfigs", ""), note)
	}
}
