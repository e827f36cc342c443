package hostcpu

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stat     string
		busy     float64
		cpus     int
		errMatch string
	}{
		{name: "two CPUs", stat: "cpu  100 5 50 1000 20 3 2 10 0 0\ncpu0 50 2 25 500 10 1 1 5 0 0\ncpu1 50 3 25 500 10 2 1 5 0 0\nintr 1 2\nctxt 3\n",
			busy: (100 + 5 + 50 + 3 + 2 + 10) / 100.0, cpus: 2},
		{name: "no per-CPU lines", stat: "cpu  1 0 1 7 0 0 0 0\n", busy: 0.02, cpus: 0},
		{name: "cpufreq-like names are not CPUs", stat: "cpu  1 0 1 7 0 0 0 0\ncpux 1\ncpu7 1 1 1 1 1 1 1 1\n", busy: 0.02, cpus: 1},
		{name: "not the cpu line", stat: "intr 1 2 3\n", errMatch: "not the aggregate cpu line"},
		{name: "too few counters", stat: "cpu 1 2 3\n", errMatch: "not the aggregate cpu line"},
		{name: "non-numeric counter", stat: "cpu 1 2 x 4 5 6 7 8\n", errMatch: "counter 3"},
		{name: "empty", stat: "", errMatch: "not the aggregate cpu line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			busy, cpus, err := ParseStat(tc.stat)
			if tc.errMatch != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMatch) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(busy-tc.busy) > 1e-9 || cpus != tc.cpus {
				t.Fatalf("got busy %v cpus %d, want %v and %d", busy, cpus, tc.busy, tc.cpus)
			}
		})
	}
}

func TestCores(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	got, err := Cores([]Sample{
		{At: at(0), Busy: 100},
		{At: at(1000), Busy: 101.5},  // 1.5 cores
		{At: at(1000), Busy: 101.5},  // no wall time: skipped
		{At: at(3000), Busy: 105.5},  // 2 cores over 2 s
		{At: at(4000), Busy: 105.0},  // counters went back (another boot?): skipped
		{At: at(4500), Busy: 105.25}, // 0.5 cores
	}, at(-2000))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ sec, v float64 }{{2, 1.5}, {3, 2}, {6, 0.5}}
	if len(got) != len(want) {
		t.Fatalf("got %d points %v, want %v", len(got), got, want)
	}
	for i, w := range want {
		if math.Abs(got[i].Sec-w.sec) > 1e-9 || math.Abs(got[i].Value-w.v) > 1e-9 {
			t.Fatalf("point %d = %+v, want sec %v value %v", i, got[i], w.sec, w.v)
		}
	}
	if _, err := Cores([]Sample{{At: t0, Busy: 1}}, t0); !errors.Is(err, ErrNoSamples) {
		t.Fatalf("one sample: err = %v, want ErrNoSamples", err)
	}
}

// The sampler reads the real /proc/stat of the machine the tests run on.
func TestSamplerReadsThisMachine(t *testing.T) {
	s := Start(20 * time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.rec.Samples)
		s.mu.Unlock()
		if n >= 10 || time.Now().After(deadline) {
			break
		}
		burn := time.Now().Add(5 * time.Millisecond)
		for time.Now().Before(burn) {
		}
	}
	rec := s.Stop()
	if rec.Err != "" {
		t.Fatal(rec.Err)
	}
	if rec.CPUs < 1 || len(rec.Samples) < 10 {
		t.Fatalf("got %d CPUs and %d samples, want ≥ 1 and ≥ 10", rec.CPUs, len(rec.Samples))
	}
	again := s.Stop()
	if len(again.Samples) != len(rec.Samples) {
		t.Fatalf("a second Stop sampled again: %d then %d samples", len(rec.Samples), len(again.Samples))
	}
	// Over the whole span (≥ 180 ms), not per 20 ms point: the kernel
	// counts busy time in 10 ms ticks.
	first, last := rec.Samples[0], rec.Samples[len(rec.Samples)-1]
	pts, err := Cores([]Sample{first, last}, first.At)
	if err != nil {
		t.Fatal(err)
	}
	if v := pts[0].Value; v <= 0 || v > float64(rec.CPUs)*1.2 {
		t.Fatalf("%.2f busy cores on a %d-CPU machine that was spinning", v, rec.CPUs)
	}
}
