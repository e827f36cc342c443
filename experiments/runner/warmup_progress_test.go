package runner

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"koala/dataplane/control"
	"koala/workflows"
)

func TestWarmUpTotal(t *testing.T) {
	for _, c := range []struct {
		name      string
		numEvents string
		producers int
		maxEvents int64
		want      int64
	}{
		{"NumEvents per producer", "250000", 2, 500000, 500000},
		{"NumEvents, producers unset", "1000", 0, 0, 1000},
		{"MaxEvents only", "", 3, 9000, 9000},
		{"bad NumEvents", "x", 1, 42, 42},
	} {
		in := workflows.ExperimentInput{Params: map[string]string{}, Producer: workflows.ProducerSpec{Producers: c.producers, MaxEvents: c.maxEvents}}
		if c.numEvents != "" {
			in.Params[control.ParamNumEvents] = c.numEvents
		}
		if got := warmUpTotal(in); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestGBText(t *testing.T) {
	for b, want := range map[uint64]string{0: "0.00 GB", 2_204_000_000: "2.20 GB", 5_000_000: "0.01 GB", 80e9: "80.00 GB"} {
		if got := gbText(b); got != want {
			t.Errorf("gbText(%d) = %q, want %q", b, got, want)
		}
	}
}

func TestETA(t *testing.T) {
	for _, c := range []struct {
		records, total int64
		rate           float64
		want           time.Duration
		ok             bool
	}{
		{250_000, 1_000_000, 25_000, 30 * time.Second, true},
		{0, 1_000_000, 3_000, 333 * time.Second, true}, // 333.3 s, rounded
		{1_000_000, 1_000_000, 25_000, 0, true},
		{1_200_000, 1_000_000, 25_000, 0, true}, // past the total: nothing left
		{100, 1_000_000, 0, 0, false},           // rate not known yet
		{100, 0, 1000, 0, false},                // no total
	} {
		got, ok := eta(c.records, c.total, c.rate)
		if got != c.want || ok != c.ok {
			t.Errorf("eta(%d, %d, %g) = %s, %v; want %s, %v", c.records, c.total, c.rate, got, ok, c.want, c.ok)
		}
	}
}

// The rate counts from the first reading with records: deploying the job
// before it does not lower it.
func TestRateMeter(t *testing.T) {
	var m rateMeter
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	if r := m.rate(t0, 0); r != 0 {
		t.Errorf("no records: rate %g", r)
	}
	if r := m.rate(t0.Add(10*time.Second), 5_000); r != 0 {
		t.Errorf("first reading with records: rate %g, want 0 (not known yet)", r)
	}
	if r := m.rate(t0.Add(14*time.Second), 105_000); r != 25_000 {
		t.Errorf("100 000 records in 4 s: rate %g, want 25000", r)
	}
}

func TestProgressLine(t *testing.T) {
	p := warmUpProgress{Elapsed: 42 * time.Second, Records: 400_000, Total: 1_000_000, StateBytes: 880_000_000, Rate: 20_000, Sampled: true}
	want := "warm-up  42s: 400000 / 1000000 records (40.0 %), state 0.88 GB, 20000 rec/s, ETA 30s"
	if got := p.line(); got != want {
		t.Errorf("line\n got %q\nwant %q", got, want)
	}
	p.Rate = 0
	if got := p.line(); strings.Contains(got, "ETA") || strings.Contains(got, "rec/s") {
		t.Errorf("without a rate: %q names a rate or an ETA", got)
	}
	p = warmUpProgress{Elapsed: 50 * time.Second, Records: 1_000_000, Total: 1_000_000, StateBytes: 2_190_000_000, Rate: 28_000, Sampled: true}
	if got, want := p.line(), "warm-up  50s: 1000000 / 1000000 records (100.0 %), state 2.19 GB, 28000 rec/s, all read: draining, then snapshot (its stores are compacted first, up to 3 min)"; got != want {
		t.Errorf("all read\n got %q\nwant %q", got, want)
	}
	if got := (warmUpProgress{Elapsed: 3 * time.Second, Total: 10}).line(); !strings.Contains(got, "no reading from the job's workers yet") {
		t.Errorf("before any reading: %q", got)
	}
}

// Output that is not a terminal gets a plain line at most every interval,
// the first at once.
func TestLineViewEvery5s(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	v := newProgressView(&out, 100)
	lv, ok := v.(*lineView)
	if !ok {
		t.Fatalf("a buffer got %T, want the plain lines", v)
	}
	lv.now = func() time.Time { return now }
	for s := 0; s <= 12; s++ {
		now = time.Date(2026, 12, 3, 0, 0, s, 0, time.UTC)
		v.update(warmUpProgress{Elapsed: time.Duration(s) * time.Second, Records: int64(s), Total: 100, Sampled: true})
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "0 / 100") || !strings.Contains(lines[1], "5 / 100") || !strings.Contains(lines[2], "10 / 100") {
		t.Errorf("lines at 0, 5 and 10 s wanted, got %q", lines)
	}
}

// The bar shows the records out of the total, the state's size, the rate
// and the time left.
func TestBarView(t *testing.T) {
	var out bytes.Buffer
	v := newBarView(&out, 1_000_000)
	v.update(warmUpProgress{Records: 500_000, Total: 1_000_000, StateBytes: 1_100_000_000, Sampled: true})
	v.finish()
	last := out.String()
	if !strings.HasSuffix(last, "\n") {
		t.Errorf("the finished bar's line is not ended: %q", last)
	}
	last = strings.TrimSuffix(last, "\n")
	if i := strings.LastIndex(last, "\r"); i >= 0 {
		last = last[i+1:]
	}
	for _, want := range []string{"state 1.10 GB", "50%", "500000/1000000", "rec/s"} {
		if !strings.Contains(last, want) {
			t.Errorf("bar %q lacks %q", last, want)
		}
	}
}
