package experiments

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"koala/dataplane/metrics"
)

func TestWriteTimeSeriesPNG(t *testing.T) {
	var a, b []metrics.Point
	for i := range 60 {
		a = append(a, metrics.Point{Sec: float64(i), Value: 1000 + 200*math.Sin(float64(i)/5)})
		b = append(b, metrics.Point{Sec: float64(i), Value: 800})
	}
	b = append(b, metrics.Point{Sec: 61, Value: math.NaN()}) // skipped, not an error
	path := filepath.Join(t.TempDir(), "nested", "dir", "throughput.png")
	err := WriteTimeSeriesPNG(path, "Q1 throughput", "events/s",
		[]Series{{Label: "sink", Points: a}, {Label: "source", Points: b}, {Label: "empty"}},
		[]Marker{{Sec: 20, Label: "reconfig start"}, {Sec: 21, Label: "end"}, {Sec: math.Inf(1)}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if w < 400 || h < 200 || w < h*3/2 || w > h*5/2 {
		t.Fatalf("size %dx%d, want about 2:1 and at least 400x200", w, h)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
}

func TestWriteTimeSeriesPNGFlatAndMarkersOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flat.png")
	flat := []metrics.Point{{Sec: 0, Value: 5}, {Sec: 1, Value: 5}}
	if err := WriteTimeSeriesPNG(path, "", "", []Series{{Label: "x", Points: flat}}, []Marker{{Sec: 0.5}}); err != nil {
		t.Fatal(err)
	}
	if err := WriteTimeSeriesPNG(path, "t", "y", []Series{{Label: "none"}}, []Marker{{Sec: 3, Label: "m"}}); err != nil {
		t.Fatal(err)
	}
}

func TestWriteTimeSeriesPNGErrors(t *testing.T) {
	s := []Series{{Label: "a", Points: []metrics.Point{{Sec: 0, Value: 1}}}}
	if err := WriteTimeSeriesPNG("", "t", "y", s, nil); err == nil {
		t.Error("empty path: want error")
	}
	if err := WriteTimeSeriesPNG(filepath.Join(t.TempDir(), "x.png"), "t", "y", nil, nil); err == nil {
		t.Error("no series: want error")
	}
}

// TestMarkerLabelLevels: a comparison's start and its four protocols'
// "done" markers get five different heights; unlabelled markers none;
// beyond maxMarkerLevels the heights repeat.
func TestMarkerLabelLevels(t *testing.T) {
	ms := []Marker{{Sec: 0, Label: "reconfiguration start"}, {Sec: 1}, {Sec: 1.1, Label: "lazy done"},
		{Sec: 2, Label: "stop-and-restart done"}, {Sec: 3, Label: "remote done"}, {Sec: 3.5, Label: "drrs done"}}
	got := markerLabelLevels(ms)
	if want := []int{0, -1, 1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("levels %v, want %v", got, want)
	}
	many := make([]Marker, maxMarkerLevels+2)
	for i := range many {
		many[i] = Marker{Sec: float64(i), Label: "m"}
	}
	if got := markerLabelLevels(many); got[maxMarkerLevels] != 0 || got[maxMarkerLevels+1] != 1 {
		t.Fatalf("levels %v: want them to repeat after %d", got, maxMarkerLevels)
	}
}
