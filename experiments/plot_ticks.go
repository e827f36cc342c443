package experiments

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
)

// secondTicks marks a time axis in whole seconds ("-25", "0", "25"). gonum's
// DefaultTicks picks the positions well but labels a step of 25 as "-25.00";
// this keeps its positions, labels them as integers, and when the default
// step is below one second (a very short axis) uses one tick per second.
type secondTicks struct{}

var _ plot.Ticker = secondTicks{}

// Ticks implements plot.Ticker.
func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	labelled := 0
	for _, t := range ticks {
		if t.IsMinor() {
			continue
		}
		if !isWhole(t.Value) {
			return wholeSecondTicks(lo, hi, ticks)
		}
		labelled++
	}
	if labelled == 0 {
		return ticks
	}
	for i, t := range ticks {
		if !t.IsMinor() {
			ticks[i].Label = formatWhole(t.Value)
		}
	}
	return ticks
}

// wholeSecondTicks puts a labelled tick on every whole second in [lo, hi];
// if there are fewer than two, it keeps def with trimmed labels.
func wholeSecondTicks(lo, hi float64, def []plot.Tick) []plot.Tick {
	first, last := math.Ceil(lo), math.Floor(hi)
	if last-first < 1 {
		return trimTickLabels(def)
	}
	var out []plot.Tick
	for v := first; v <= last; v++ {
		out = append(out, plot.Tick{Value: v, Label: formatWhole(v)})
	}
	return out
}

// compactTicks is gonum's DefaultTicks without needless decimals: "2000"
// rather than "2000.00", "0.5" rather than "0.50".
type compactTicks struct{}

var _ plot.Ticker = compactTicks{}

// Ticks implements plot.Ticker.
func (compactTicks) Ticks(lo, hi float64) []plot.Tick {
	return trimTickLabels(plot.DefaultTicks{}.Ticks(lo, hi))
}

// trimTickLabels drops trailing zeros (and a bare decimal point) from the
// fixed-point labels of ticks; exponent labels ("1e+07") are left alone.
func trimTickLabels(ticks []plot.Tick) []plot.Tick {
	for i, t := range ticks {
		ticks[i].Label = trimDecimals(t.Label)
	}
	return ticks
}

func trimDecimals(s string) string {
	if !strings.Contains(s, ".") || strings.ContainsAny(s, "eE") {
		return s
	}
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// isWhole reports whether v is an integer up to the rounding error of the
// tick arithmetic.
func isWhole(v float64) bool {
	return math.Abs(v-math.Round(v)) <= 1e-9*max(1, math.Abs(v))
}

func formatWhole(v float64) string {
	r := math.Round(v)
	if r == 0 { // no "-0"
		r = 0
	}
	return strconv.FormatFloat(r, 'f', 0, 64)
}
