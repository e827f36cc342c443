package produce

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// Producer rate schedule
//
// The artifact's producers are limited to RateLimit events per 200 ms
// interval each, and step through a list of rates: RateLimit[i] applies
// for RateChangeInterval[i] intervals, then RateLimit[i+1]; the last step
// holds until the producer stops (its length may be omitted). N producers
// write N times the scheduled rate. In a config:
//
//	"RateLimiterConfig": {"RateLimit": [10000, 20000], "RateChangeInterval": [1500, 1500]}

// RateInterval is the length of one rate-limiter interval.
const RateInterval = 200 * time.Millisecond

// Bounds of a rate schedule.
const (
	MaxRateLimit      = 10_000_000 // events per interval per producer (50 M/s)
	MaxRateSteps      = 10_000
	MaxRateStepLength = 1 << 31 // intervals (about 13.6 years)
)

// RateSchedule is a validated rate schedule (see ParseRateLimiterConfig).
type RateSchedule struct {
	RateLimit          []int64 // events per interval per producer, per step
	RateChangeInterval []int64 // length of each step in intervals
}

// Validate checks the schedule; errors name the field and the entry.
func (s RateSchedule) Validate() error {
	var errs []error
	if len(s.RateLimit) == 0 {
		errs = append(errs, errors.New("RateLimiterConfig.RateLimit: must list at least one rate"))
	}
	if len(s.RateLimit) > MaxRateSteps {
		errs = append(errs, fmt.Errorf("RateLimiterConfig.RateLimit: %d steps, at most %d are allowed", len(s.RateLimit), MaxRateSteps))
	}
	if n := len(s.RateChangeInterval); n != len(s.RateLimit) && n != len(s.RateLimit)-1 {
		errs = append(errs, fmt.Errorf("RateLimiterConfig.RateChangeInterval: has %d entries, RateLimit has %d; give one step length (in %v intervals) per rate (the last may be omitted)",
			len(s.RateChangeInterval), len(s.RateLimit), RateInterval))
	}
	for i, r := range s.RateLimit {
		if r < 0 || r > MaxRateLimit {
			errs = append(errs, fmt.Errorf("RateLimiterConfig.RateLimit[%d]: %s is out of range (events per %v interval per producer, between 0 and %d)", i, number(r), RateInterval, MaxRateLimit))
		}
	}
	for i, n := range s.RateChangeInterval {
		if n < 1 || n > MaxRateStepLength {
			errs = append(errs, fmt.Errorf("RateLimiterConfig.RateChangeInterval[%d]: %s is out of range (a number of %v intervals between 1 and %d)", i, number(n), RateInterval, int64(MaxRateStepLength)))
		}
	}
	return errors.Join(errs...)
}

// RateAt returns the events per interval of interval k (counting from 0
// at the producer's start) and the step it belongs to. A schedule without
// steps yields 0.
func (s RateSchedule) RateAt(k int64) (rate int64, step int) {
	if len(s.RateLimit) == 0 {
		return 0, 0
	}
	for i, n := range s.RateChangeInterval {
		if i == len(s.RateLimit)-1 {
			break
		}
		if k < n {
			return s.RateLimit[i], i
		}
		k -= n
	}
	last := len(s.RateLimit) - 1
	return s.RateLimit[last], last
}

// ParseRateLimiterConfig parses the config's "RateLimiterConfig" object
// ({"RateLimit": [...], "RateChangeInterval": [...]}) and validates it.
// Errors name the field; unknown fields and non-integer values are errors.
func ParseRateLimiterConfig(raw []byte) (RateSchedule, error) {
	var s RateSchedule
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return s, fmt.Errorf("RateLimiterConfig: expected an object {\"RateLimit\": [...], \"RateChangeInterval\": [...]}, got %s", truncate(raw))
	}
	var obj struct {
		RateLimit          []json.Number
		RateChangeInterval []json.Number
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return s, fmt.Errorf("RateLimiterConfig: %w (fields: RateLimit and RateChangeInterval, arrays of whole numbers)", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return s, errors.New("RateLimiterConfig: unexpected data after the object")
	}
	var errs []error
	ints := func(field string, in []json.Number) []int64 {
		out := make([]int64, 0, len(in))
		for i, n := range in {
			v, err := strconv.ParseInt(n.String(), 10, 64)
			if err != nil { // 2e3 is a whole number too; a huge one is out of range
				f, ferr := strconv.ParseFloat(n.String(), 64)
				if (ferr != nil && !errors.Is(ferr, strconv.ErrRange)) || f != math.Trunc(f) {
					errs = append(errs, fmt.Errorf("RateLimiterConfig.%s[%d]: expected a whole number, got %s", field, i, n))
					continue
				}
				v = math.MaxInt64
				if f > math.MinInt64 && f < math.MaxInt64 {
					v = int64(f)
				} else if f < 0 {
					v = math.MinInt64
				}
			}
			out = append(out, v)
		}
		return out
	}
	s.RateLimit = ints("RateLimit", obj.RateLimit)
	s.RateChangeInterval = ints("RateChangeInterval", obj.RateChangeInterval)
	if len(errs) > 0 {
		return RateSchedule{}, errors.Join(errs...)
	}
	if err := s.Validate(); err != nil {
		return RateSchedule{}, err
	}
	return s, nil
}

// number renders v, saying "too large" for values clamped while parsing.
func number(v int64) string {
	switch v {
	case math.MaxInt64:
		return "a value too large"
	case math.MinInt64:
		return "a value too small"
	}
	return strconv.FormatInt(v, 10)
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	if len(b) == 0 {
		return "nothing"
	}
	return string(b)
}
