package produce

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"koala/dataplane/control"
	"koala/dataplane/dptest/testkafka"
)

func TestRateScheduleRateAt(t *testing.T) {
	two := RateSchedule{RateLimit: []int64{100, 300}, RateChangeInterval: []int64{3, 2}}
	three := RateSchedule{RateLimit: []int64{10, 0, 50}, RateChangeInterval: []int64{1, 2}} // last length omitted
	for _, tc := range []struct {
		name     string
		s        RateSchedule
		k        int64
		rate     int64
		wantStep int
	}{
		{"first interval", two, 0, 100, 0},
		{"last interval of step 0", two, 2, 100, 0},
		{"first interval of step 1", two, 3, 300, 1},
		{"end of the schedule", two, 4, 300, 1},
		{"last step holds", two, 1_000_000, 300, 1},
		{"one-interval step", three, 0, 10, 0},
		{"zero-rate step", three, 1, 0, 1},
		{"zero-rate step end", three, 2, 0, 1},
		{"omitted last length", three, 3, 50, 2},
		{"omitted last length holds", three, 99, 50, 2},
		{"single step", RateSchedule{RateLimit: []int64{7}}, 5, 7, 0},
		{"empty schedule", RateSchedule{}, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rate, step := tc.s.RateAt(tc.k)
			if rate != tc.rate || step != tc.wantStep {
				t.Fatalf("RateAt(%d) = %d, step %d; want %d, step %d", tc.k, rate, step, tc.rate, tc.wantStep)
			}
		})
	}
}

func TestParseRateLimiterConfig(t *testing.T) {
	s, err := ParseRateLimiterConfig([]byte(` {"RateLimit": [1000, 2e3], "RateChangeInterval": [150, 300]} `))
	if err != nil {
		t.Fatal(err)
	}
	if s.RateLimit[1] != 2000 || s.RateChangeInterval[1] != 300 {
		t.Fatalf("parsed %+v", s)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"array", `[{"Rate":5}]`, "RateLimiterConfig: expected an object"},
		{"unknown field", `{"RateLimit":[1],"Rates":[2]}`, `unknown field "Rates"`},
		{"fraction", `{"RateLimit":[1.5],"RateChangeInterval":[1]}`, "RateLimiterConfig.RateLimit[0]: expected a whole number, got 1.5"},
		{"negative rate", `{"RateLimit":[5,-1],"RateChangeInterval":[1,1]}`, "RateLimiterConfig.RateLimit[1]: -1 is out of range"},
		{"oversize rate", `{"RateLimit":[10000001],"RateChangeInterval":[1]}`, "RateLimiterConfig.RateLimit[0]: 10000001 is out of range"},
		{"huge rate", `{"RateLimit":[99999999999999999999],"RateChangeInterval":[1]}`, "RateLimiterConfig.RateLimit[0]: a value too large is out of range"},
		{"zero length", `{"RateLimit":[5,6],"RateChangeInterval":[0,1]}`, "RateLimiterConfig.RateChangeInterval[0]: 0 is out of range"},
		{"oversize length", `{"RateLimit":[5],"RateChangeInterval":[4294967296]}`, "RateLimiterConfig.RateChangeInterval[0]: 4294967296 is out of range"},
		{"no rates", `{"RateChangeInterval":[]}`, "RateLimiterConfig.RateLimit: must list at least one rate"},
		{"length mismatch", `{"RateLimit":[1,2,3],"RateChangeInterval":[1]}`, "RateLimiterConfig.RateChangeInterval: has 1 entries, RateLimit has 3"},
		{"wrong type", `{"RateLimit":"fast"}`, "RateLimiterConfig: json: cannot unmarshal string"},
		{"trailing data", `{"RateLimit":[1]} {}`, "unexpected data after the object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRateLimiterConfig([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := NewProducer(control.ProduceRequest{Topic: "t", KafkaBrokers: []string{"127.0.0.1:1"}, NumKeys: 1,
		RateLimit: []int64{5}, RateChangeInterval: []int64{1, 2, 3}}, nil); err == nil || !strings.Contains(err.Error(), "RateChangeInterval") {
		t.Fatalf("producer with a bad schedule: err = %v", err)
	}
}

// TestProduceRateSchedule runs two producers with a two-step schedule
// against kfake and counts their records by Kafka timestamp: each step's
// window holds the step's quota times the number of producers, within one
// interval's quota of the first step per producer (an interval that starts
// late on a loaded machine spills into the next window). The windows are
// measured from the first record, which a loaded machine stamps after the
// schedule's start, so each ends half an interval early: the next
// interval's burst, due at a whole interval from the start, then never
// falls inside it.
func TestProduceRateSchedule(t *testing.T) {
	if testing.Short() {
		t.Skip("timed producer run")
	}
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	const producers, low, high, steps = 2, 50, 200, 5 // 5 intervals = 1 s per step
	req := control.ProduceRequest{Topic: "in", KafkaBrokers: kc.ListenAddrs(), NumKeys: 10,
		RateLimit: []int64{low, high}, RateChangeInterval: []int64{steps, steps}, MaxEvents: steps * (low + high)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, producers)
	reps := make([]control.ProduceReport, producers)
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			r.Seed = int64(i)
			reps[i], errs[i] = Produce(ctx, r, nil, nil)
		}()
	}
	wg.Wait()
	total := producers * int(req.MaxEvents)
	for i := range producers {
		if errs[i] != nil || reps[i].Acked != req.MaxEvents {
			t.Fatalf("producer %d: acked %d of %d, err %v", i, reps[i].Acked, req.MaxEvents, errs[i])
		}
	}
	parts := testkafka.ReadTopic(t, kc.ListenAddrs(), "in", total)
	var t0 time.Time
	for _, recs := range parts {
		for _, r := range recs {
			if t0.IsZero() || r.Timestamp.Before(t0) {
				t0 = r.Timestamp
			}
		}
	}
	var first, step0, step1 int
	for _, recs := range parts {
		for _, r := range recs {
			d := r.Timestamp.Sub(t0)
			switch {
			case d < RateInterval/2:
				first++
				step0++
			case d < steps*RateInterval-RateInterval/2:
				step0++
			default:
				step1++
			}
		}
	}
	t.Logf("by timestamp: first interval %d, step 0 window %d, step 1 window %d", first, step0, step1)
	if first > producers*low {
		t.Errorf("first interval holds %d records, the limit is %d per producer (%d)", first, low, producers*low)
	}
	tol := producers * low
	if d := step0 - producers*steps*low; d > tol || d < -tol {
		t.Errorf("step 0 window holds %d records, want %d ± %d", step0, producers*steps*low, tol)
	}
	if d := step1 - producers*steps*high; d > tol || d < -tol {
		t.Errorf("step 1 window holds %d records, want %d ± %d", step1, producers*steps*high, tol)
	}
}
