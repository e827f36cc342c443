package experiments

import (
	"fmt"
	"path/filepath"
)

// CompareLagOthersFile is the Kafka lag plot drawn again without the one
// protocol whose backlog dwarfs the others' (remote's, in the GB-scale
// comparisons: 23 M records against 3 M). In the plot of all protocols
// the others' backlogs are then a flat line along the axis, and the
// dominant one's drain after the input ends stretches the time axis too.
const CompareLagOthersFile = "kafka-lag-others.png"

// dominantPeakFactor is how many times every other series' peak a series'
// peak must be for the others to get a plot of their own.
const dominantPeakFactor = 3.0

// dominantSeries returns the index of the series whose peak is at least
// dominantPeakFactor times each other series' peak, when there are at
// least three series (so the others still compare something) and some
// other series has a positive peak (else there is nothing to show apart).
func dominantSeries(series []Series) (int, bool) {
	if len(series) < 3 {
		return 0, false
	}
	peaks := make([]float64, len(series))
	top := 0
	for i, s := range series {
		peaks[i], _ = peakOf(s.Points) // no finite point: 0, no peak
		if peaks[i] > peaks[top] {
			top = i
		}
	}
	rest := 0.0
	for i, pk := range peaks {
		if i != top {
			rest = max(rest, pk)
		}
	}
	if rest <= 0 || peaks[top] < dominantPeakFactor*rest {
		return 0, false
	}
	return top, true
}

// writeLagOthers writes CompareLagOthersFile into dir when one protocol's
// lag dominates (dominantSeries); it returns the path written, or "".
func writeLagOthers(dir, experiment string, lag []Series, markers []Marker) (string, error) {
	top, ok := dominantSeries(lag)
	if !ok {
		return "", nil
	}
	others := make([]Series, 0, len(lag)-1)
	for i, s := range lag {
		if i != top {
			others = append(others, s)
		}
	}
	var ms []Marker
	for _, m := range markers {
		if m.Label != doneLabel(lag[top].Label) {
			ms = append(ms, m)
		}
	}
	title := fmt.Sprintf("%s: source Kafka lag without %s (its peak is at least %.0f× each other's)", experiment, lag[top].Label, dominantPeakFactor)
	p := filepath.Join(dir, CompareLagOthersFile)
	if err := WriteTimeSeriesPNG(p, title, "records", others, ms); err != nil {
		return "", err
	}
	return p, nil
}
