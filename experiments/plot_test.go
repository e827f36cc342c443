package experiments

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
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
