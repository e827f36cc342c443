package experiments

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"koala/dataplane/control"
	"koala/dataplane/produce"
	"koala/workflows"
)

// Scaling a config to the machine
//
// The artifact's configs size a cluster: hundreds of thousands of events
// per second, millions of keys, tens of GB of warm-up state, runs of ten
// minutes and warm-ups of hours. `koala run` and `koala suite` take two
// factors that shrink such a config for one machine without editing it:
//
//   - Scale (--scale F) multiplies every rate (RatePerSecond, every
//     RateLimit step), key space (NumKeys, NumActivePeople, the Nexmark
//     knobs that count keys and their hot ranges), event count (NumEvents,
//     OutputEventNumber) and state size (DummyFieldSize, ListStateSize,
//     ListLength). A run then lasts as long with F times the load and
//     state; its warm-up snapshot directory gets a "-scaleF" suffix, so
//     snapshots built at different scales never mix.
//   - TimeScale (--time-scale T) multiplies TotalRuntimeSeconds, every
//     reconfiguration's TriggerTimeSeconds and every RateChangeInterval
//     step (and a suite's cool-down and retry delay).
//
// Whole numbers are rounded; a positive value stays at least 1, so that
// nothing a config turns on is turned off.

// Scale holds the two factors; the zero value means 1 and 1.
type Scale struct {
	Factor float64 // --scale
	Time   float64 // --time-scale
}

func (s Scale) factor() float64 { return orOne(s.Factor) }
func (s Scale) time() float64   { return orOne(s.Time) }

func orOne(f float64) float64 {
	if f == 0 {
		return 1
	}
	return f
}

// IsOne says whether s changes nothing.
func (s Scale) IsOne() bool { return s.factor() == 1 && s.time() == 1 }

// Check rejects factors that are not finite numbers > 0, naming the flag.
func (s Scale) Check() error {
	var errs []error
	for _, f := range []struct {
		flag string
		v    float64
	}{{"--scale", s.Factor}, {"--time-scale", s.Time}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be a number > 0 (a factor: 1 runs the config as written, 0.05 at a twentieth)", f.flag, f.v))
		}
	}
	return errors.Join(errs...)
}

// CheckSet is Check for factors given on a command line, where 0 is a
// value the user typed, not "unset".
func (s Scale) CheckSet() error {
	if err := s.Check(); err != nil {
		return err
	}
	var errs []error
	if s.Factor == 0 {
		errs = append(errs, errors.New("--scale 0: must be a number > 0 (a factor: 1 runs the config as written, 0.05 at a twentieth)"))
	}
	if s.Time == 0 {
		errs = append(errs, errors.New("--time-scale 0: must be a number > 0 (a factor: 1 runs the config as written, 0.25 in a quarter of the time)"))
	}
	return errors.Join(errs...)
}

// scaledParams are the Params that Scale.Factor multiplies.
var scaledParams = []string{control.ParamNumEvents, control.ParamOutputEventNumber, control.ParamDummyFieldSize, control.ParamListStateSize, control.ParamListLength}

// scaledKnobs are the NexmarkSource.Knobs that count keys (the ratios do
// not scale).
var scaledKnobs = []string{"NumActiveAuctions", "NumInFlightEvents", "NumCategories", "HotSellerRange", "HotAuctionRange", "HotBidderRange", "HotCategoryRange"}

// Apply scales in (see the comment at the top) and returns a note saying
// so, or "" when s changes nothing.
func (s Scale) Apply(in *workflows.ExperimentInput) (string, error) {
	if err := s.Check(); err != nil {
		return "", err
	}
	if s.IsOne() {
		return "", nil
	}
	f, t := s.factor(), s.time()
	in.Producer.RatePerSec = int(scaleInt(int64(in.Producer.RatePerSec), f))
	in.Producer.NumKeys = int(scaleInt(int64(in.Producer.NumKeys), f))
	in.Producer.MaxEvents = scaleInt(in.Producer.MaxEvents, f)
	if n := in.Producer.Nexmark; n != nil {
		c := *n // the input may share it with other copies
		c.NumActivePeople = int(scaleInt(int64(c.NumActivePeople), f))
		c.OutputEventNumber = scaleInt(c.OutputEventNumber, f)
		c.HotSellerRange = int(scaleInt(int64(c.HotSellerRange), f))
		if c.Knobs != nil {
			knobs := make(map[string]float64, len(c.Knobs))
			for k, v := range c.Knobs {
				for _, sk := range scaledKnobs {
					if k == sk {
						v = float64(scaleInt(int64(v), f))
					}
				}
				knobs[k] = v
			}
			c.Knobs = knobs
		}
		in.Producer.Nexmark = &c
	}
	params := make(map[string]string, len(in.Params))
	for k, v := range in.Params {
		params[k] = v
	}
	for _, k := range scaledParams {
		if v, ok := params[k]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return "", fmt.Errorf("%s %q: want a whole number to scale", k, v)
			}
			params[k] = strconv.FormatInt(scaleInt(n, f), 10)
		}
	}
	if rc := params["RateLimiterConfig"]; rc != "" {
		sched, err := produce.ParseRateLimiterConfig([]byte(rc))
		if err != nil {
			return "", fmt.Errorf("RateLimiterConfig: %w", err)
		}
		params["RateLimiterConfig"] = scheduleJSON(scaleSchedule(sched, f, t))
	}
	if dir := params[control.ParamWarmUpSnapshotDir]; dir != "" && f != 1 {
		params[control.ParamWarmUpSnapshotDir] = dir + "-scale" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	in.Params = params

	in.TotalRuntimeSeconds = int(scaleInt(int64(in.TotalRuntimeSeconds), t))
	rs := make([]workflows.ReconfigSpec, len(in.Reconfigurations))
	for i, r := range in.Reconfigurations {
		r.TriggerTimeSeconds = int(scaleInt(int64(r.TriggerTimeSeconds), t))
		// Rounding may not move a reconfiguration past the run's end.
		r.TriggerTimeSeconds = min(r.TriggerTimeSeconds, in.TotalRuntimeSeconds-1)
		rs[i] = r
	}
	if in.Reconfigurations != nil {
		in.Reconfigurations = rs
	}
	return fmt.Sprintf("scaled by --scale %g (rates, key spaces, event counts, state sizes) and --time-scale %g (run time %d s, trigger times, rate steps)", f, t, in.TotalRuntimeSeconds), nil
}
