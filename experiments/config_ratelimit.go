package experiments

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"koala/dataplane/produce"
)

// The artifact's RateLimiterConfig
//
// The artifact writes {"UseRateLimit": true, "RateLimit": [...],
// "RateChangeInterval": [...]}: with UseRateLimit false its producers
// generate as fast as they can and the lists are not read. Its limiter
// (query/rateLimiter in the artifact) moves to RateLimit[i+1] after
// RateChangeInterval[i] intervals and holds the last rate for good, so
// entries of RateChangeInterval past the (len(RateLimit)−1)-th never take
// effect: a list one entry longer than RateLimit (as 17 of its configs
// have) means the same schedule as one cut to len(RateLimit).
//
// Here a schedule is produce.RateSchedule (RateLimit per 200 ms interval
// per producer). rateLimiterOf reads the artifact's object into one;
// UseRateLimit false yields none, and the producers run at RatePerSecond.

// rateLimiterFields are the fields of a RateLimiterConfig object.
var rateLimiterFields = []string{"UseRateLimit", "RateLimit", "RateChangeInterval", "GeneratorInterval"}

// rateLimiterOf parses a RateLimiterConfig at at. use is false when the
// config turns the limiter off; ok is false after an error.
func (p *parser) rateLimiterOf(raw json.RawMessage, at string) (s produce.RateSchedule, use, ok bool) {
	if k := kindOf(raw); k != "object" {
		p.errorf("%s: expected an object {\"RateLimit\": [...], \"RateChangeInterval\": [...]}, got %s", at, k)
		return s, false, false
	}
	members, err := objectMembers(raw)
	if err != nil {
		p.errorf("%s: %v", at, err)
		return s, false, false
	}
	use, ok = true, true
	rest := map[string]json.RawMessage{}
	for _, m := range members {
		switch m.name {
		case "UseRateLimit":
			if kindOf(m.raw) != "boolean" {
				p.errorf("%s.UseRateLimit: expected true or false, got %s", at, kindOf(m.raw))
				ok = false
				continue
			}
			use = strings.TrimSpace(string(m.raw)) == "true"
		case "GeneratorInterval":
			// The artifact's interval length; koala's is fixed at
			// produce.RateInterval, which is the artifact's default.
			var d string
			if json.Unmarshal(m.raw, &d) != nil || (d != "200ms" && d != "0.2s") {
				p.errorf("%s.GeneratorInterval: %s is not supported (allowed: \"200ms\", the interval RateLimit counts events in)", at, compact(m.raw))
				ok = false
			}
		case "RateLimit", "RateChangeInterval":
			rest[m.name] = m.raw
		default:
			p.errorf("unknown field %q in %s%s", m.name, at, suggest(m.name, rateLimiterFields))
			ok = false
		}
	}
	if !ok || !use {
		return s, use, ok
	}
	var rl, rci []json.RawMessage
	_ = json.Unmarshal(rest["RateLimit"], &rl) // kinds are checked by ParseRateLimiterConfig
	_ = json.Unmarshal(rest["RateChangeInterval"], &rci)
	if len(rl) > 0 && len(rci) == len(rl)+1 {
		p.notef("%s: RateChangeInterval has %d entries for %d rates; its last entry never applies (the artifact's limiter holds the last rate), so it is left out", at, len(rci), len(rl))
		trimmed, _ := json.Marshal(rci[:len(rl)])
		rest["RateChangeInterval"] = trimmed
	}
	obj, _ := json.Marshal(rest)
	s, err = produce.ParseRateLimiterConfig(obj)
	if err != nil {
		errs := []error{err}
		if j, isJoin := err.(interface{ Unwrap() []error }); isJoin {
			errs = j.Unwrap()
		}
		for _, e := range errs {
			p.errorf("%s: %v", at, e)
		}
		return s, true, false
	}
	return s, true, true
}

// scheduleJSON renders s as the RateLimiterConfig koala's producers read.
func scheduleJSON(s produce.RateSchedule) string {
	out, _ := json.Marshal(struct {
		RateLimit          []int64
		RateChangeInterval []int64
	}{s.RateLimit, append([]int64{}, s.RateChangeInterval...)})
	return string(out)
}

// sumSchedules adds schedules interval by interval: one producer of the
// result emits what one producer of each input would together (the
// artifact runs one producer per Nexmark event type; koala's producer
// generates the event types as one stream).
func sumSchedules(ss []produce.RateSchedule) produce.RateSchedule {
	if len(ss) == 1 {
		return ss[0]
	}
	// Every interval at which some input changes its rate.
	var bounds []int64
	for _, s := range ss {
		at := int64(0)
		for i, n := range s.RateChangeInterval {
			if i == len(s.RateLimit)-1 {
				break
			}
			at += n
			bounds = append(bounds, at)
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	rateAt := func(k int64) int64 {
		var sum int64
		for _, s := range ss {
			r, _ := s.RateAt(k)
			sum += r
		}
		return sum
	}
	var out produce.RateSchedule
	start := int64(0)
	for _, b := range bounds {
		r := rateAt(start)
		if n := len(out.RateLimit); n > 0 && out.RateLimit[n-1] == r {
			out.RateChangeInterval[n-1] += b - start // same rate: one longer step
		} else {
			out.RateLimit = append(out.RateLimit, r)
			out.RateChangeInterval = append(out.RateChangeInterval, b-start)
		}
		start = b
	}
	last := rateAt(start)
	if n := len(out.RateLimit); n > 0 && out.RateLimit[n-1] == last {
		out.RateChangeInterval = out.RateChangeInterval[:n-1] // the last step holds
	} else {
		out.RateLimit = append(out.RateLimit, last)
	}
	return out
}

// scaleSchedule multiplies rates by rf and step lengths by tf, keeping a
// positive value at least 1 so that scaling never turns a step off.
func scaleSchedule(s produce.RateSchedule, rf, tf float64) produce.RateSchedule {
	out := produce.RateSchedule{RateLimit: make([]int64, len(s.RateLimit)), RateChangeInterval: make([]int64, len(s.RateChangeInterval))}
	for i, r := range s.RateLimit {
		out.RateLimit[i] = scaleInt(r, rf)
	}
	for i, n := range s.RateChangeInterval {
		out.RateChangeInterval[i] = scaleInt(n, tf)
	}
	return out
}

// scaleInt multiplies v by f, rounding to the nearest whole number; a
// positive v stays ≥ 1 and the result saturates instead of overflowing.
func scaleInt(v int64, f float64) int64 {
	if v == 0 || f == 1 {
		return v
	}
	x := math.Round(float64(v) * f)
	switch {
	case x >= math.MaxInt64:
		return math.MaxInt64
	case v > 0 && x < 1:
		return 1
	}
	return int64(x)
}

// describeSchedule renders a schedule for notes: "800 → 1600 after 600".
func describeSchedule(s produce.RateSchedule) string {
	var b strings.Builder
	for i, r := range s.RateLimit {
		if i > 0 {
			fmt.Fprintf(&b, " → after %d intervals ", s.RateChangeInterval[i-1])
		}
		fmt.Fprintf(&b, "%d", r)
	}
	return b.String() + " events per 200 ms interval per producer"
}
