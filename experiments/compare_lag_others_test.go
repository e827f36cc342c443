package experiments

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"koala/dataplane/metrics"
)

func peakSeries(label string, peak float64) Series {
	return Series{Label: label, Points: []metrics.Point{{Sec: -5, Value: 0}, {Sec: 0, Value: peak / 2}, {Sec: 5, Value: peak}, {Sec: 10, Value: 0}}}
}

func TestDominantSeries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		peaks []float64
		want  int
		ok    bool
	}{
		{"remote dwarfs the rest", []float64{3e6, 3.5e6, 2.6e6, 23.5e6}, 3, true},
		{"exactly the factor", []float64{1e6, 3e6, 0.5e6}, 1, true},
		{"just under the factor", []float64{1e6, 2.99e6, 0.5e6}, 0, false},
		{"two series are too few", []float64{1e6, 9e6}, 0, false},
		{"the others all zero", []float64{0, 9e6, 0}, 0, false},
		{"all alike", []float64{1e6, 1.1e6, 0.9e6, 1.2e6}, 0, false},
		{"none", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ss []Series
			for i, p := range tc.peaks {
				ss = append(ss, peakSeries(string(rune('a'+i)), p))
			}
			got, ok := dominantSeries(ss)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("dominantSeries = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	// Points that are not numbers are no peak.
	ss := []Series{peakSeries("a", 1e6), peakSeries("b", 1e6), {Label: "c", Points: []metrics.Point{{Sec: 1, Value: math.NaN()}, {Sec: 2, Value: math.Inf(1)}}}}
	if i, ok := dominantSeries(ss); ok {
		t.Fatalf("a series of NaN and Inf dominates (%d)", i)
	}
}

func TestComparisonWriteFilesLagOthers(t *testing.T) {
	c := sampleComparison()
	big := c.Rows[0]
	big.Protocol = "remote"
	big.LagAligned = slices.Clone(big.LagAligned)
	for i := range big.LagAligned {
		big.LagAligned[i].Value = 1e6
	}
	c.Rows[2] = big
	dir := filepath.Join(t.TempDir(), "compare-x")
	paths, err := c.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, CompareLagOthersFile)
	if !slices.Contains(paths, want) {
		t.Fatalf("paths %v, want %s among them", paths, want)
	}
	if st, err := os.Stat(want); err != nil || st.Size() == 0 {
		t.Fatalf("%s: %v", want, err)
	}

	// Without a dominant protocol the file is not written.
	dir = filepath.Join(t.TempDir(), "compare-y")
	paths, err = sampleComparison().WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(paths, filepath.Join(dir, CompareLagOthersFile)) {
		t.Fatalf("paths %v", paths)
	}
	if _, err := os.Stat(filepath.Join(dir, CompareLagOthersFile)); !os.IsNotExist(err) {
		t.Fatalf("%s written: %v", CompareLagOthersFile, err)
	}
}
