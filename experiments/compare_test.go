package experiments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"koala/dataplane/control"
	"koala/dataplane/metrics"
	"koala/experiments/internal/fixture"
	"koala/workflows"
)

// pts builds a per-second series: values[i] at second first+i; NaN marks a
// missing second.
func pts(first float64, values ...float64) []metrics.Point {
	var out []metrics.Point
	for i, v := range values {
		if !math.IsNaN(v) {
			out = append(out, metrics.Point{Sec: first + float64(i), Value: v})
		}
	}
	return out
}

var nan = math.NaN()

func fp(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func eqPtr(p *float64, want float64, ok bool) bool {
	if !ok {
		return p == nil
	}
	return p != nil && fixture.Approx(*p, want)
}

func TestParseVariants(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: CompareVariants},
		{in: " , ", want: CompareVariants},
		{in: "lazy,stop-and-restart", want: []string{"lazy", "stop-and-restart"}},
		{in: " drrs , lazy ", want: []string{"drrs", "lazy"}},
		{in: "remote", want: []string{"remote"}},
		{in: "lazy,koala", wantErr: `unknown protocol "koala"`},
		{in: "lazy,lazy", wantErr: "listed twice"},
	} {
		got, err := ParseVariants(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestVariantInput(t *testing.T) {
	base := workflows.ExperimentInput{
		Name: "counter", QueryName: "counter", ReconfigProtocol: "lazy", StateBackend: "pebble",
		Parallelism:      map[string]int{"counter": 2},
		Reconfigurations: []workflows.ReconfigSpec{{TriggerTimeSeconds: 30, Type: "scaleup", TargetOperator: "counter", TargetParallelism: 4}},
		Params:           map[string]string{"LazyByKeyGradualMigrationBatchSize": "500"},
	}
	withAddrs := base
	withAddrs.Params = map[string]string{"RemotePebbleAddrs": "10.0.0.1:7000,10.0.0.2:7000"}
	blankAddrs := base
	blankAddrs.Params = map[string]string{"RemotePebbleAddrs": " , "}
	noParams := base
	noParams.Params = nil

	for _, tc := range []struct {
		name, variant, flag      string
		base                     workflows.ExperimentInput
		protocol, backend, addrs string
		skip, err                string
	}{
		{name: "lazy keeps knobs", variant: "lazy", base: base, protocol: "lazy", backend: "pebble"},
		{name: "s&r keeps backend", variant: "stop-and-restart", base: base, protocol: "stop-and-restart", backend: "pebble"},
		{name: "drrs", variant: "drrs", base: base, protocol: "drrs", backend: "pebble"},
		{name: "remote without addrs", variant: "remote", base: base, protocol: "stop-and-restart", backend: "remote-pebble", skip: "RemotePebbleAddrs"},
		{name: "remote blank addrs", variant: "remote", base: blankAddrs, protocol: "stop-and-restart", backend: "remote-pebble", skip: "--remote-pebble"},
		{name: "remote from flag", variant: "remote", flag: " 127.0.0.1:7700 ", base: base, protocol: "stop-and-restart", backend: "remote-pebble", addrs: "127.0.0.1:7700"},
		{name: "remote from config", variant: "remote", base: withAddrs, protocol: "stop-and-restart", backend: "remote-pebble", addrs: "10.0.0.1:7000,10.0.0.2:7000"},
		{name: "flag overrides config", variant: "remote", flag: "a:1,b:2", base: withAddrs, protocol: "stop-and-restart", backend: "remote-pebble", addrs: "a:1,b:2"},
		{name: "nil params", variant: "remote", flag: "a:1", base: noParams, protocol: "stop-and-restart", backend: "remote-pebble", addrs: "a:1"},
		{name: "unknown", variant: "koala", base: base, err: "unknown protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.base)
			in, skip, err := VariantInput(tc.base, tc.variant, tc.flag)
			after, _ := json.Marshal(tc.base)
			if !bytes.Equal(before, after) {
				t.Fatalf("base modified:\n%s\n%s", before, after)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (skip != "") != (tc.skip != "") || !strings.Contains(skip, tc.skip) {
				t.Fatalf("skip %q, want %q", skip, tc.skip)
			}
			if in.ReconfigProtocol != tc.protocol || in.StateBackend != tc.backend {
				t.Fatalf("protocol %q backend %q", in.ReconfigProtocol, in.StateBackend)
			}
			if tc.addrs != "" && in.Params[control.ParamRemotePebbleAddrs] != tc.addrs {
				t.Fatalf("addrs %q, want %q", in.Params[control.ParamRemotePebbleAddrs], tc.addrs)
			}
			if tc.base.Params["LazyByKeyGradualMigrationBatchSize"] != "" && in.Params["LazyByKeyGradualMigrationBatchSize"] != "500" {
				t.Fatalf("lazy knob lost: %v", in.Params)
			}
			if in.Name != "counter" || len(in.Reconfigurations) != 1 || in.Parallelism["counter"] != 2 {
				t.Fatalf("experiment changed: %+v", in)
			}
		})
	}
}

func TestNotAvailable(t *testing.T) {
	drrs := errors.New(`ReconfigProtocol "drrs" is not implemented yet (implemented: lazy, stop-and-restart)`)
	wrapped := temporal.NewNonRetryableApplicationError(drrs.Error(), "BadConfig", drrs)
	for _, tc := range []struct {
		name   string
		err    error
		ok     bool
		reason string
	}{
		{"nil", nil, false, ""},
		{"plain", drrs, true, drrs.Error()},
		{"wrapped", fmt.Errorf("workflow execution error: %w", wrapped), true, drrs.Error()},
		{"unimplemented rpc", errors.New("rpc error: code = Unimplemented desc = unknown service"), true, "rpc error: code = Unimplemented desc = unknown service"},
		{"other failure", errors.New("activity DeployTasks failed: timeout"), false, ""},
	} {
		reason, ok := NotAvailable(tc.err)
		if ok != tc.ok || (ok && reason != tc.reason) {
			t.Errorf("%s: %q %v, want %q %v", tc.name, reason, ok, tc.reason, tc.ok)
		}
	}
}

func TestWindowMean(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pts      []metrics.Point
		from, to float64
		mean, lo float64
		n        int
	}{
		{"warm-up skipped", pts(0, 1, 2, 3, 10, 20, 30), 3, 6, 20, 10, 3},
		{"partial last second excluded", pts(0, 0, 0, 0, 10, 20, 30), 3, 5.5, 15, 10, 2},
		{"gap skipped, not zero", pts(0, 0, 0, 0, 10, nan, 30), 3, 6, 20, 10, 2},
		{"empty window", pts(0, 5, 5), 3, 10, 0, 0, 0},
		{"no points", nil, 3, 10, 0, 0, 0},
		{"unbounded", pts(0, 0, 0, 0, 4, 8), 3, math.Inf(1), 6, 4, 2},
	} {
		mean, lo, n := WindowMean(tc.pts, tc.from, tc.to)
		if !fixture.Approx(mean, tc.mean) || !fixture.Approx(lo, tc.lo) || n != tc.n {
			t.Errorf("%s: mean %v lo %v n %d, want %v %v %d", tc.name, mean, lo, n, tc.mean, tc.lo, tc.n)
		}
	}
}

func TestWindowMin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pts      []metrics.Point
		from, to float64
		want     float64
		ok       bool
	}{
		{"overlapping seconds", pts(0, 10, 9, 3, 8, 10), 1.5, 3.2, 3, true},
		{"second before from excluded", pts(0, 1, 9, 9, 9), 1, 3, 9, true},
		{"zero second", pts(0, 10, 0, 0, 10), 1, 2, 0, true},
		{"single missing second is jitter", pts(0, 10, 9, nan, 12, 10), 1, 4, 9, true},
		{"two missing seconds are a stall", pts(0, 10, 9, nan, nan, 12), 1, 4, 0, true},
		{"stall outside the window ignored", pts(0, 10, nan, nan, 9, 8, 7), 3, 5, 8, true},
		{"stall covering the whole window", pts(0, 10, nan, nan, nan, nan, 10), 2, 3, 0, true},
		{"window after the series", pts(0, 10, 10), 5, 8, 0, false},
		{"no points", nil, 0, 10, 0, false},
		{"instant window", pts(0, 10, 7, 10), 1.4, 1.4, 7, true},
		{"reversed window is an instant", pts(0, 10, 7, 10), 1.4, 0.2, 7, true},
	} {
		got, ok := WindowMin(tc.pts, tc.from, tc.to)
		if ok != tc.ok || !fixture.Approx(got, tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestWindowMax(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pts      []metrics.Point
		from, to float64
		want     float64
		ok       bool
	}{
		{"max in window", pts(0, 100, 5, 7, 3, 100), 1, 4, 7, true},
		{"gaps ignored", pts(0, 1, nan, nan, 4), 0, 10, 4, true},
		{"nothing in window", pts(0, 1, 2), 5, 6, 0, false},
		{"negative values", pts(0, -3, -1), 0, 2, -1, true},
	} {
		got, ok := WindowMax(tc.pts, tc.from, tc.to)
		if ok != tc.ok || !fixture.Approx(got, tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLagRecovery(t *testing.T) {
	const thr = 1000
	for _, tc := range []struct {
		name    string
		lag     []metrics.Point
		start   float64
		horizon float64
		sec     float64
		note    string
	}{
		// seconds:                    10  11    12    13    14   15   16
		{"rise and recover", pts(10, 0, 5000, 20000, 8000, 500, 200, 100), 10.5, 60, 3.5, LagRecovered},
		{"never rises", pts(10, 0, 900, 1000, 300, 0), 10.5, 60, 0, LagNoRise},
		{"never recovers", pts(10, 0, 5000, 9000, 12000, 15000), 10.5, 60, 0, LagNeverRecovered},
		{"one good second is not enough", pts(10, 0, 5000, 500, 4000, 300, 200), 10, 60, 4, LagRecovered},
		{"last point alone cannot confirm", pts(10, 0, 5000, 5000, 300), 10, 60, 0, LagNeverRecovered},
		{"single missing second within the stay", pts(10, 5000, 300, nan, 200, 100), 10, 60, 1, LagRecovered},
		{"two missing seconds break the stay", pts(10, 5000, 300, nan, nan, 200, 100), 10, 60, 4, LagRecovered},
		{"drain after input end not counted", pts(10, 0, 5000, 9000, 12000, 0, 0, 0), 10, 14, 0, LagNeverRecovered},
		{"rise before start ignored, low after", pts(8, 9000, 9000, 100, 100, 100), 10, 60, 0, LagNoRise},
		{"already high at start", pts(8, 9000, 9000, 9000, 9000, 100, 100), 10, 60, 2, LagRecovered},
		{"no data after start", pts(0, 1, 2, 3), 10, 60, 0, LagNoData},
		{"no data at all", nil, 10, 60, 0, LagNoData},
	} {
		sec, note := LagRecovery(tc.lag, tc.start, thr, tc.horizon)
		if note != tc.note || !fixture.Approx(sec, tc.sec) {
			t.Errorf("%s: %v %q, want %v %q", tc.name, sec, note, tc.sec, tc.note)
		}
	}
}

func TestLagThreshold(t *testing.T) {
	for _, tc := range []struct{ mean, want float64 }{{0, 1000}, {2000, 3000}, {5000, 6000}, {10000, 12000}, {100000, 120000}} {
		if got := LagThreshold(tc.mean); !fixture.Approx(got, tc.want) {
			t.Errorf("LagThreshold(%v) = %v, want %v", tc.mean, got, tc.want)
		}
	}
}

func TestPercentileAndSum(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted
	}
	for _, tc := range []struct {
		name string
		vs   []float64
		p    float64
		want float64
		ok   bool
	}{
		{"p99 of 1..100", hundred, 99, 99, true},
		{"p100", hundred, 100, 100, true},
		{"p50", hundred, 50, 50, true},
		{"single", []float64{7}, 99, 7, true},
		{"non-finite skipped", []float64{1, math.Inf(1), nan, 3}, 99, 3, true},
		{"empty", nil, 99, 0, false},
		{"bad p", []float64{1}, 0, 0, false},
	} {
		got, ok := Percentile(tc.vs, tc.p)
		if ok != tc.ok || !fixture.Approx(got, tc.want) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	if s := SumValues(append(pts(0, 1, 2, nan, 3), metrics.Point{Sec: 9, Value: math.Inf(1)})); s != 6 {
		t.Errorf("sum %v", s)
	}
	if s := SumValues(nil); s != 0 {
		t.Errorf("empty sum %v", s)
	}
}

// A stop-and-restart-like run: 10k ev/s, reconfiguration [30.5, 33.0],
// zero throughput in 31 and 32, a catch-up burst, lag rising and recovering.
func srSeries() RunSeries {
	sink := make([]float64, 60)
	lag := make([]float64, 60)
	for i := range sink {
		sink[i] = 10000
		lag[i] = 200
	}
	sink[0], sink[1], sink[2] = 100, 3000, 50000 // warm-up, ignored
	sink[31], sink[32], sink[33], sink[34] = 0, 0, 25000, 14000
	lag[31], lag[32], lag[33], lag[34] = 10000, 20000, 8000, 900
	return RunSeries{
		Sink: pts(0, sink...),
		Lag:  pts(0, lag...),
		BatchMaxByTask: map[string][]metrics.Point{
			"counter-0": pts(0, 0, 0, 0, 0, 5000, 6000, 7000, 8000, 9000, 10000), // pre samples 5000..10000 (seconds 4..9)
			"counter-1": append(pts(3, 4000), metrics.Point{Sec: 33, Value: 170000}, metrics.Point{Sec: 40, Value: 999999}),
		},
		Bytes:     pts(30, 0, 616000, 620128, 0),
		Reconfigs: []Interval{{Start: 30.5, End: 33.0}},
		InputEnd:  60,
	}
}

func TestComputeRunMetrics(t *testing.T) {
	type want struct {
		pre, preMin, min, ratio, lagMean, thr, peakLag, rec, peakBatch, p99 float64
		has                                                                 string // which of the above are set (letters), others must be nil
		note                                                                string
		bytes                                                               float64
	}
	check := func(t *testing.T, m RunMetrics, w want) {
		t.Helper()
		fields := []struct {
			letter byte
			name   string
			got    *float64
			want   float64
		}{
			{'a', "pre", m.PreThroughput, w.pre}, {'b', "preMin", m.PreMinThroughput, w.preMin},
			{'c', "min", m.MinThroughput, w.min}, {'d', "ratio", m.MinRatio, w.ratio},
			{'e', "lagMean", m.PreLagMean, w.lagMean}, {'f', "thr", m.LagThreshold, w.thr},
			{'g', "peakLag", m.PeakLag, w.peakLag}, {'h', "recovery", m.LagRecoverySec, w.rec},
			{'i', "peakBatch", m.PeakBatchUs, w.peakBatch}, {'j', "p99", m.PreBatchP99Us, w.p99},
		}
		for _, f := range fields {
			if !eqPtr(f.got, f.want, strings.IndexByte(w.has, f.letter) >= 0) {
				t.Errorf("%s = %s, want %v (set: %v)", f.name, fp(f.got), f.want, strings.IndexByte(w.has, f.letter) >= 0)
			}
		}
		if m.LagNote != w.note {
			t.Errorf("note %q, want %q", m.LagNote, w.note)
		}
		if m.BytesMigrated != w.bytes {
			t.Errorf("bytes %v, want %v", m.BytesMigrated, w.bytes)
		}
	}

	t.Run("stop-and-restart", func(t *testing.T) {
		// Pre window: seconds 3..29 all 10000; min window [30.5, 35.0) holds 30..34.
		// Lag rises at 31, ≤ 1200 from 34 on → recovery 34 − 30.5. Peak batch in
		// [30.5, 38]: 170000 (the 999999 at 40 is outside). p99 of {4000, 5000..10000} = 10000.
		check(t, ComputeRunMetrics(srSeries()), want{
			pre: 10000, preMin: 10000, min: 0, ratio: 0, lagMean: 200, thr: 1200, peakLag: 20000, rec: 3.5,
			peakBatch: 170000, p99: 10000, has: "abcdefghij", bytes: 1236128,
		})
	})
	t.Run("unsorted input gives the same", func(t *testing.T) {
		s := srSeries()
		slices.Reverse(s.Sink)
		slices.Reverse(s.Lag)
		check(t, ComputeRunMetrics(s), want{
			pre: 10000, preMin: 10000, min: 0, ratio: 0, lagMean: 200, thr: 1200, peakLag: 20000, rec: 3.5,
			peakBatch: 170000, p99: 10000, has: "abcdefghij", bytes: 1236128,
		})
	})
	t.Run("lazy dip", func(t *testing.T) {
		s := srSeries()
		s.Sink = pts(0, 0, 0, 0, 8000, 12000, 10000, 10000, 10000)                // pre 3..7: mean 10000, min 8000
		s.Sink = append(s.Sink, pts(8, 9500, 9200, 9900, 10000, 10000, 10000)...) // reconfig [8.2, 9.0] + 2 → seconds 8..10
		s.Lag = pts(0, 0, 0, 0, 100, 100, 100, 100, 100, 200, 300, 100, 100, 100)
		s.BatchMaxByTask = nil
		s.Bytes = nil
		s.Reconfigs = []Interval{{Start: 8.2, End: 9.0}}
		s.InputEnd = 14
		check(t, ComputeRunMetrics(s), want{
			pre: 10000, preMin: 8000, min: 9200, ratio: 0.92, lagMean: 100, thr: 1100, peakLag: 300, rec: 0,
			has: "abcdefgh", note: LagNoRise,
		})
	})
	t.Run("lag never recovers", func(t *testing.T) {
		s := srSeries()
		for i := range s.Lag {
			if s.Lag[i].Sec >= 31 {
				s.Lag[i].Value = 50000
			}
		}
		check(t, ComputeRunMetrics(s), want{
			pre: 10000, preMin: 10000, min: 0, ratio: 0, lagMean: 200, thr: 1200, peakLag: 50000,
			peakBatch: 170000, p99: 10000, has: "abcdefgij", note: LagNeverRecovered, bytes: 1236128,
		})
	})
	t.Run("flat lag while the sink stalled is not a recovery", func(t *testing.T) {
		s := srSeries()
		for i := range s.Lag {
			s.Lag[i].Value = 0
		}
		check(t, ComputeRunMetrics(s), want{
			pre: 10000, preMin: 10000, min: 0, ratio: 0, lagMean: 0, thr: 1000, peakLag: 0,
			peakBatch: 170000, p99: 10000, has: "abcdefgij", note: LagNotMeasured, bytes: 1236128,
		})
	})
	t.Run("flat lag at a low rate is a plausible no rise", func(t *testing.T) {
		s := srSeries()
		for i := range s.Lag {
			s.Lag[i].Value = 0
		}
		for i := range s.Sink {
			s.Sink[i].Value = min(s.Sink[i].Value, 800) // a 1 s stall leaves 800 < 1000 records behind
		}
		m := ComputeRunMetrics(s)
		if !eqPtr(m.LagRecoverySec, 0, true) || m.LagNote != LagNoRise || !eqPtr(m.MinThroughput, 0, true) {
			t.Fatalf("recovery %s note %q min %s", fp(m.LagRecoverySec), m.LagNote, fp(m.MinThroughput))
		}
	})
	t.Run("drain recovery after input end does not count", func(t *testing.T) {
		s := srSeries()
		for i := range s.Lag {
			if s.Lag[i].Sec >= 31 && s.Lag[i].Sec < 55 {
				s.Lag[i].Value = 50000
			}
		}
		s.InputEnd = 55
		m := ComputeRunMetrics(s)
		if m.LagRecoverySec != nil || m.LagNote != LagNeverRecovered {
			t.Fatalf("recovery %s note %q", fp(m.LagRecoverySec), m.LagNote)
		}
		s.InputEnd = 0 // unknown: the drain counts
		m = ComputeRunMetrics(s)
		if !eqPtr(m.LagRecoverySec, 55-30.5, true) {
			t.Fatalf("recovery without input end %s", fp(m.LagRecoverySec))
		}
	})
	t.Run("sink stalled without rows", func(t *testing.T) {
		s := srSeries()
		s.Sink = slices.DeleteFunc(s.Sink, func(p metrics.Point) bool { return p.Sec == 31 || p.Sec == 32 || p.Sec == 30 })
		m := ComputeRunMetrics(s)
		if !eqPtr(m.MinThroughput, 0, true) || !eqPtr(m.MinRatio, 0, true) {
			t.Fatalf("min %s ratio %s", fp(m.MinThroughput), fp(m.MinRatio))
		}
	})
	t.Run("one missing second during reconfiguration is jitter", func(t *testing.T) {
		s := srSeries()
		s.Sink = pts(0, 0, 0, 0, 10000, 10000, 10000, 10000, 10000, 10000, 10000, nan, 20000, 10000, 10000, 10000)
		s.Reconfigs = []Interval{{Start: 10.2, End: 11.5}}
		m := ComputeRunMetrics(s)
		if !eqPtr(m.MinThroughput, 10000, true) || !eqPtr(m.MinRatio, 1, true) {
			t.Fatalf("min %s ratio %s", fp(m.MinThroughput), fp(m.MinRatio))
		}
	})
	t.Run("no reconfiguration", func(t *testing.T) {
		s := srSeries()
		s.Reconfigs = nil
		s.Sink = pts(0, 0, 0, 0, 10, 20, 30)
		s.Lag = pts(0, 5, 5, 5, 1, 2, 3)
		s.InputEnd = 5 // seconds 3 and 4 only (also for the batch samples)
		check(t, ComputeRunMetrics(s), want{
			pre: 15, preMin: 10, lagMean: 1.5, thr: 1001.5, p99: 5000, has: "abefj", note: "no reconfiguration", bytes: 1236128,
		})
	})
	t.Run("no series at all", func(t *testing.T) {
		check(t, ComputeRunMetrics(RunSeries{Reconfigs: []Interval{{Start: 30, End: 31}}}), want{
			note: "no lag data before the reconfiguration",
		})
	})
	t.Run("pre throughput zero gives no ratio", func(t *testing.T) {
		s := srSeries()
		s.Sink = pts(0, 0, 0, 0, 0, 0, 0, 0, 5, 5)
		s.Reconfigs = []Interval{{Start: 7, End: 8}}
		m := ComputeRunMetrics(s)
		if !eqPtr(m.PreThroughput, 0, true) || m.MinRatio != nil || !eqPtr(m.MinThroughput, 5, true) {
			t.Fatalf("pre %s ratio %s min %s", fp(m.PreThroughput), fp(m.MinRatio), fp(m.MinThroughput))
		}
	})
	t.Run("several reconfigurations span first start to last end", func(t *testing.T) {
		s := srSeries()
		s.Reconfigs = []Interval{{Start: 40, End: 41}, {Start: 30.5, End: 31}} // out of order
		s.Sink = pts(0, slices.Repeat([]float64{10000}, 60)...)
		s.Sink[42].Value = 100 // inside [30.5, 41+2)
		s.Sink[45].Value = 50  // outside
		m := ComputeRunMetrics(s)
		if !eqPtr(m.MinThroughput, 100, true) {
			t.Fatalf("min %s", fp(m.MinThroughput))
		}
	})
}

func TestShift(t *testing.T) {
	got := Shift([]metrics.Point{{Sec: 32, Value: 2}, {Sec: 30, Value: 1}, {Sec: 31, Value: nan}}, 30.5)
	want := []metrics.Point{{Sec: -0.5, Value: 1}, {Sec: 1.5, Value: 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("%v", got)
	}
}

func TestBuildRow(t *testing.T) {
	jobStart := time.Date(2026, 11, 29, 9, 6, 5, 0, time.UTC)
	res := workflows.ExperimentResult{
		JobID: "counter-lazy-x", StartedAt: jobStart.Add(500 * time.Millisecond), Produced: 600000, Lost: 0, Duplicated: 2,
		Reconfigs: []workflows.ReconfigOutcome{{
			ID: "r1", Protocol: "stop-and-restart", StartSec: 30, EndSec: 32.5,
			Steps: []workflows.StepTiming{{Step: "plan", Millis: 0.1}, {Step: "pause-and-drain", Millis: 71}},
		}},
	}
	sr := srSeries()
	sr.Reconfigs, sr.InputEnd = nil, 0
	row := BuildRow(CompareRow{Protocol: "stop-and-restart", WorkflowID: "w"}, res, 60, jobStart, sr)
	if row.Status != StatusOK || row.JobID != "counter-lazy-x" || row.Produced != 600000 || row.Duplicated != 2 {
		t.Fatalf("row %+v", row)
	}
	if !row.ExactnessViolated() {
		t.Fatal("duplicates not flagged")
	}
	if len(row.ReconfigSpan) != 1 || row.ReconfigSpan[0] != (Interval{Start: 30.5, End: 33}) {
		t.Fatalf("span %v (want the workflow's times shifted by 0.5 s onto the metric axis)", row.ReconfigSpan)
	}
	if !fixture.Approx(row.ControlPlaneMs, 2500) || len(row.Reconfigs) != 1 || len(row.Reconfigs[0].Steps) != 2 {
		t.Fatalf("control plane %v %+v", row.ControlPlaneMs, row.Reconfigs)
	}
	if !eqPtr(row.LagRecoverySec, 3.5, true) || !eqPtr(row.MinRatio, 0, true) {
		t.Fatalf("metrics %+v", row.RunMetrics)
	}
	if row.SinkAligned[0].Sec != -30.5 || len(row.SinkAligned) != 60 || len(row.LagAligned) != 60 {
		t.Fatalf("aligned %v", row.SinkAligned[:2])
	}

	// No reconfiguration fired: nothing to align on.
	res.Reconfigs = nil
	row = BuildRow(CompareRow{Protocol: "lazy"}, res, 60, jobStart, srSeries())
	if row.ControlPlaneMs != 0 || row.Reconfigs != nil {
		t.Fatalf("row %+v", row)
	}
	row = BuildRow(CompareRow{Protocol: "lazy"}, res, 60, jobStart, RunSeries{})
	if row.SinkAligned != nil || row.LagNote != "no reconfiguration" {
		t.Fatalf("aligned %v note %q", row.SinkAligned, row.LagNote)
	}
}

func sampleComparison() Comparison {
	jobStart := time.Date(2026, 11, 29, 9, 6, 5, 0, time.UTC)
	res := workflows.ExperimentResult{
		JobID: "j-sr", StartedAt: jobStart, Produced: 600000,
		Reconfigs: []workflows.ReconfigOutcome{{ID: "r1", Protocol: "stop-and-restart", StartSec: 30.5, EndSec: 33,
			Steps: []workflows.StepTiming{{Step: "plan", Millis: 0.1}, {Step: "move-state", Millis: 664}},
			Moves: []workflows.StateMove{{Step: "await-migration", Bytes: 12_300_000, Millis: 160, Bulk: true}}}},
	}
	sr := srSeries()
	sr.Reconfigs = nil
	srRow := BuildRow(CompareRow{Protocol: "stop-and-restart", WorkflowID: "counter-stop-and-restart-1"}, res, 60, jobStart, sr)

	lz := srSeries()
	lz.Reconfigs = nil
	for i := range lz.Sink {
		if lz.Sink[i].Value < 10000 && lz.Sink[i].Sec > 3 {
			lz.Sink[i].Value = 9500
		}
	}
	for i := range lz.Lag {
		lz.Lag[i].Value = 100
	}
	res.Reconfigs = slices.Clone(res.Reconfigs)
	res.Reconfigs[0].Protocol = "lazy"
	res.Reconfigs[0].Moves = []workflows.StateMove{{Step: "await-migration", Bytes: 3_400_000, Millis: 2100}}
	res.JobID, res.Lost = "j-lazy", 3
	lazyRow := BuildRow(CompareRow{Protocol: "lazy", WorkflowID: "counter-lazy-1"}, res, 60, jobStart, lz)

	return Comparison{
		Experiment: "counter-lazy-2to4", Config: "experiments/bench/counter-lazy-2to4.json",
		Started: time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC),
		Rows: []CompareRow{
			lazyRow, srRow,
			{Protocol: "remote", Status: StatusSkipped, Reason: "no remote state server"},
			{Protocol: "drrs", Status: StatusNotAvailable, Reason: `ReconfigProtocol "drrs" is not implemented yet`},
		},
	}
}

func TestComparisonTableAndMarkdown(t *testing.T) {
	c := sampleComparison()
	var buf bytes.Buffer
	if err := c.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "protocol  ") || !strings.Contains(lines[0], "lag recovery") {
		t.Fatalf("header %q", lines[0])
	}
	// Aligned: every data row as wide as the header.
	for _, l := range lines[1:3] {
		if len([]rune(l)) != len([]rune(lines[0])) {
			t.Errorf("row %q not aligned with header %q", l, lines[0])
		}
	}
	for _, want := range []string{
		"0.00 <0.9", "3.5 s", "1.2 MB", "2500 ms", "170.0 ms", "10.0 ms",
		"remote            skipped: no remote state server",
		`drrs              not available: ReconfigProtocol "drrs" is not implemented yet`,
		"plan 0 + move-state 664",
		"!!! EXACTNESS VIOLATED", "lazy: lost=3 duplicated=0",
		"3 !!",
		// The state moved and its rate: S&R's bulk move, lazy's labelled.
		"  12.3 MB in 0.16 s     77 MB/s  ",
		"  3.4 MB lazy, await 2.10 s  n/a (lazy)  ",
		"\n" + movesHeading + "\n",
		"  stop-and-restart  r1 await-migration: 12.3 MB in 0.16 s (77 MB/s)\n",
		"  lazy              r1 await-migration: 3.4 MB migrated, await 2.10 s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if f := strings.Fields(lines[0]); !strings.Contains(strings.Join(f, " "), "migrated state moved move rate control plane") {
		t.Errorf("header %q lacks the state columns after migrated", lines[0])
	}
	md := c.Markdown()
	for _, want := range []string{
		"| protocol | pre ev/s | pre min | min ev/s |",
		"| stop-and-restart | 10000 | 10000 | 0 | 0.00 <0.9 | n/a | 3.5 s |",
		"| remote | skipped: no remote state server |",
		"| drrs | not available: ReconfigProtocol \"drrs\" is not implemented yet |",
		"**EXACTNESS VIOLATED**",
		"| stop-and-restart | counter-stop-and-restart-1 | 2500 ms = plan 0 + move-state 664 |",
		"| migrated | state moved | move rate | control plane |",
		"| 1.2 MB | 12.3 MB in 0.16 s | 77 MB/s | 2500 ms |",
		"| 1.2 MB | 3.4 MB lazy, await 2.10 s | n/a (lazy) | 2500 ms |",
		"## State moved",
		"| stop-and-restart | r1 await-migration: 12.3 MB in 0.16 s (77 MB/s) |",
		"*state moved*, *move rate*",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if len(c.Violations()) != 1 {
		t.Fatalf("violations %v", c.Violations())
	}
}

// TestStateMoveCells: the state-moved cells sum a run's moves — DRRS's
// subscales and several reconfigurations alike — and give a rate only for
// bulk moves.
func TestStateMoveCells(t *testing.T) {
	bulk := func(step string, bytes uint64, ms float64) workflows.StateMove {
		return workflows.StateMove{Step: step, Bytes: bytes, Millis: ms, Bulk: true}
	}
	for _, tc := range []struct {
		name        string
		rcs         []ReconfigSummary
		moved, rate string
		text        string
	}{
		{name: "no move (remote state, stateless)", rcs: []ReconfigSummary{{ID: "r1"}}, moved: "n/a", rate: "n/a"},
		{name: "no reconfiguration", moved: "n/a", rate: "n/a"},
		{name: "drrs subscales", rcs: []ReconfigSummary{{ID: "r1", Moves: []workflows.StateMove{
			bulk("subscale-1/2-await-migration", 6_000_000, 100), bulk("subscale-2/2-await-migration", 4_000_000, 150),
		}}}, moved: "10.0 MB in 0.25 s", rate: "40 MB/s",
			text: "r1 subscale-1/2-await-migration: 6.0 MB in 0.10 s (60 MB/s); r1 subscale-2/2-await-migration: 4.0 MB in 0.15 s (27 MB/s)"},
		{name: "two reconfigurations", rcs: []ReconfigSummary{
			{ID: "r1", Moves: []workflows.StateMove{bulk("await-migration", 500_000, 200)}},
			{ID: "r2", Moves: []workflows.StateMove{bulk("await-migration", 300_000, 200)}},
		}, moved: "800.0 KB in 0.40 s", rate: "2.00 MB/s"},
		{name: "lazy", rcs: []ReconfigSummary{{ID: "r1", Moves: []workflows.StateMove{{Step: "await-migration", Bytes: 3_400_000, Millis: 2100}}}},
			moved: "3.4 MB lazy, await 2.10 s", rate: "n/a (lazy)", text: "r1 await-migration: 3.4 MB migrated, await 2.10 s"},
		{name: "instant bulk move", rcs: []ReconfigSummary{{ID: "r1", Moves: []workflows.StateMove{bulk("await-migration", 0, 0)}}},
			moved: "0 B in 0.00 s", rate: "n/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := CompareRow{Protocol: "p", Status: StatusOK, Reconfigs: tc.rcs, StateMove: SumStateMoves(tc.rcs)}
			moved, rate := row.stateMoveCells()
			if moved != tc.moved || rate != tc.rate {
				t.Errorf("cells %q, %q; want %q, %q", moved, rate, tc.moved, tc.rate)
			}
			if tc.text != "" && row.movesText() != tc.text {
				t.Errorf("moves %q\nwant   %q", row.movesText(), tc.text)
			}
			movedAt := slices.Index(compareHeader, "state moved")
			if cs := row.cells(); len(cs) != len(compareHeader) || movedAt < 0 || cs[movedAt] != tc.moved || cs[movedAt+1] != tc.rate {
				t.Errorf("row cells %q", cs)
			}
		})
	}
	// The totals are in compare.json.
	m := SumStateMoves([]ReconfigSummary{{Moves: []workflows.StateMove{bulk("a", 12_300_000, 160)}}})
	if m == nil || m.Bytes != 12_300_000 || m.Millis != 160 || !m.Bulk || m.MBPerSec == nil || !fixture.Approx(*m.MBPerSec, 76.875) {
		t.Fatalf("total %+v", m)
	}
}

func TestComparisonWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "compare-x")
	paths, err := sampleComparison().WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{CompareJSONFile, CompareMarkdownFile, CompareThroughputFile, CompareLagFile}
	if len(paths) != len(want) {
		t.Fatalf("paths %v", paths)
	}
	for i, w := range want {
		if paths[i] != filepath.Join(dir, w) {
			t.Errorf("path %d %s, want %s", i, paths[i], w)
		}
		st, err := os.Stat(paths[i])
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", w, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, CompareJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Rows) != 4 || back.Rows[1]["min_ratio"] != 0.0 || back.Rows[2]["min_ratio"] != nil || back.Rows[2]["status"] != StatusSkipped {
		t.Fatalf("json rows %v", back.Rows)
	}
	if _, ok := back.Rows[0]["sink_throughput_aligned"]; !ok {
		t.Fatal("aligned series missing from json")
	}

	// Nothing ran: no plots, still the tables.
	only := Comparison{Experiment: "x", Rows: []CompareRow{{Protocol: "drrs", Status: StatusNotAvailable, Reason: "nope"}}}
	paths, err = only.WriteFiles(filepath.Join(t.TempDir(), "c"))
	if err != nil || len(paths) != 2 {
		t.Fatalf("paths %v err %v", paths, err)
	}
}

func TestBytesText(t *testing.T) {
	for _, tc := range []struct {
		b    float64
		want string
	}{{0, "0 B"}, {999, "999 B"}, {1000, "1.0 KB"}, {1236128, "1.2 MB"}, {3.5e9, "3.50 GB"}, {math.NaN(), "n/a"}} {
		if got := BytesText(tc.b); got != tc.want {
			t.Errorf("BytesText(%v) = %q, want %q", tc.b, got, tc.want)
		}
	}
}

func TestComparisonNotes(t *testing.T) {
	s := srSeries()
	for i := range s.Lag {
		s.Lag[i].Value = 0
	}
	flat := CompareRow{Protocol: "stop-and-restart", Status: StatusOK, RunMetrics: ComputeRunMetrics(s), MetricsError: "kafka lag: timeout"}
	never := srSeries()
	for i := range never.Lag {
		if never.Lag[i].Sec >= 31 {
			never.Lag[i].Value = 1e6
		}
	}
	nev := CompareRow{Protocol: "lazy", Status: StatusOK, RunMetrics: ComputeRunMetrics(never)}
	c := Comparison{Experiment: "x", Rows: []CompareRow{nev, flat}}
	var buf bytes.Buffer
	if err := c.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"n/a (unmeasured)", "n/a (never)", "\nnotes\n",
		"stop-and-restart: lag recovery n/a: " + LagNotMeasured,
		"lazy: lag recovery n/a: " + LagNeverRecovered,
		"stop-and-restart: metrics: kafka lag: timeout",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if md := c.Markdown(); !strings.Contains(md, "## Notes\n\n- lazy: lag recovery n/a: never recovered\n") {
		t.Errorf("markdown notes:\n%s", md)
	}
	if c.Violations() != nil {
		t.Fatal("no violation expected")
	}
}

// TestComputeRunMetricsBatchHistograms merges the per-second batch-time
// histograms over the pre-scale window (warm-up and the reconfiguration's
// first second left out) and over the seconds overlapping [start, end +
// LatencySlackSec).
func TestComputeRunMetricsBatchHistograms(t *testing.T) {
	s := srSeries() // reconfiguration [30.5, 33.0]: window up to 38
	s.BatchHists = []metrics.BatchHistSample{
		{Task: "counter-0", Sec: 2, Hist: fixture.BatchHist(t, 1, 50*time.Millisecond)}, // warm-up
		{Task: "counter-0", Sec: 10, Hist: fixture.BatchHist(t, 60, time.Millisecond)},
		{Task: "counter-1", Sec: 10, Hist: fixture.BatchHist(t, 40, time.Millisecond)},
		{Task: "counter-1", Sec: 29, Hist: fixture.BatchHist(t, 1, 2*time.Millisecond)},
		{Task: "counter-0", Sec: 30, Hist: fixture.BatchHist(t, 10, 20*time.Millisecond)}, // overlaps the start
		{Task: "counter-2", Sec: 37, Hist: fixture.BatchHist(t, 1, 40*time.Millisecond)},
		{Task: "counter-2", Sec: 38, Hist: fixture.BatchHist(t, 1, 900*time.Millisecond)}, // after the window
	}
	m := ComputeRunMetrics(s)
	near := func(got, want int64) bool { return got >= want-want/1000 && got <= want+want/1000 }
	if p := m.PreBatch; p == nil || p.Count != 101 || !near(p.P50Us, 1000) || !near(p.P99Us, 1000) || !near(p.MaxUs, 2000) {
		t.Errorf("pre-scale batches: %+v", p)
	}
	if p := m.ReconfigBatch; p == nil || p.Count != 11 || !near(p.P50Us, 20_000) || !near(p.P99Us, 40_000) || !near(p.MaxUs, 40_000) {
		t.Errorf("batches around the reconfiguration: %+v", p)
	}
	if m.BatchHDRError != "" {
		t.Errorf("error %q", m.BatchHDRError)
	}
	s.BatchHists = append(s.BatchHists, metrics.BatchHistSample{Task: "counter-0", Sec: 31, Hist: "%%%"})
	if m := ComputeRunMetrics(s); m.ReconfigBatch != nil || m.BatchHDRError == "" || m.PreBatch == nil {
		t.Errorf("a corrupt row in the reconfiguration window: %+v / %+v, error %q", m.PreBatch, m.ReconfigBatch, m.BatchHDRError)
	}
	s.BatchHists = nil
	if m := ComputeRunMetrics(s); m.PreBatch != nil || m.ReconfigBatch != nil || m.BatchHDRError != "" {
		t.Errorf("no histograms: %+v %+v %q", m.PreBatch, m.ReconfigBatch, m.BatchHDRError)
	}
}

func TestNeedsStateServer(t *testing.T) {
	withAddrs := workflows.ExperimentInput{Params: map[string]string{control.ParamRemotePebbleAddrs: " 127.0.0.1:7070 "}}
	blank := workflows.ExperimentInput{Params: map[string]string{control.ParamRemotePebbleAddrs: " , "}}
	for _, tc := range []struct {
		name     string
		base     workflows.ExperimentInput
		variants []string
		flag     string
		want     bool
	}{
		{"no remote variant", workflows.ExperimentInput{}, []string{VariantLazy, VariantDRRS}, "", false},
		{"remote, nothing configured", workflows.ExperimentInput{}, []string{VariantLazy, VariantRemote}, "", true},
		{"remote, blank list in config", blank, []string{VariantRemote}, " ,", true},
		{"remote, flag names one", workflows.ExperimentInput{}, []string{VariantRemote}, "127.0.0.1:7070", false},
		{"remote, config names one", withAddrs, []string{VariantRemote}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsStateServer(tc.base, tc.variants, tc.flag); got != tc.want {
				t.Fatalf("NeedsStateServer = %v, want %v", got, tc.want)
			}
		})
	}
}
