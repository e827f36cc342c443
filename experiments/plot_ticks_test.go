package experiments

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/plot"
)

// majorLabels are the labels of the labelled ticks, in order.
func majorLabels(ticks []plot.Tick) []string {
	var out []string
	for _, t := range ticks {
		if !t.IsMinor() {
			out = append(out, t.Label)
		}
	}
	return out
}

func TestSecondTicks_WholeSecondLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		want   []string
	}{
		// gonum's DefaultTicks labels this axis "-50.00", "-25.00", ...
		{"fig8 window", -55, 35, []string{"-50", "-25", "0", "25"}},
		{"run of 90 s", 0, 90, []string{"0", "40", "80"}},
		{"fractional ends", -0.4, 57.3, []string{"0", "25", "50"}},
		// default step below a second: one tick per whole second instead
		{"short axis", 0, 2.2, []string{"0", "1", "2"}},
		{"under one whole second", 0.1, 0.9, []string{"0.1", "0.3", "0.5", "0.7", "0.9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := majorLabels(secondTicks{}.Ticks(tc.lo, tc.hi))
			if !slices.Equal(got, tc.want) {
				t.Errorf("labels %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCompactTicks_NoNeedlessDecimals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		want   []string
	}{
		{"events per second", 0, 52000, []string{"0", "25000", "50000"}},
		{"milliseconds", 0, 4.6, []string{"0", "2", "4"}},
		{"fractions keep their digits", 0, 1.1, []string{"0", "0.5", "1"}},
		{"small fractions", 0, 0.011, []string{"0", "0.005", "0.01"}},
		{"negative", -10, 10, []string{"-10", "0", "10"}},
		{"step 2.5", -55, 35, []string{"-50", "-25", "0", "25"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := majorLabels(compactTicks{}.Ticks(tc.lo, tc.hi))
			if !slices.Equal(got, tc.want) {
				t.Errorf("labels %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTrimDecimals(t *testing.T) {
	for in, want := range map[string]string{
		"-25.00":   "-25",
		"0.50":     "0.5",
		"2000":     "2000",
		"-0.00":    "0",
		"1e+07":    "1e+07",
		"1.50e-08": "1.50e-08",
		"":         "",
	} {
		if got := trimDecimals(in); got != want {
			t.Errorf("trimDecimals(%q) = %q, want %q", in, got, want)
		}
	}
	if got := formatWhole(math.Copysign(0, -1)); got != "0" {
		t.Errorf("formatWhole(-0) = %q, want 0", got)
	}
}
