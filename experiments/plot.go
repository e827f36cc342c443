package experiments

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"koala/dataplane/metrics"
)

// Series is one labelled line of a time-series chart.
type Series struct {
	Label  string
	Points []metrics.Point
}

// Marker is a vertical dashed line on a time-series chart, e.g. the start of a
// reconfiguration.
type Marker struct {
	Sec   float64
	Label string
}

// Size of the PNG written by WriteTimeSeriesPNG.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 4 * vg.Inch
)

// WriteTimeSeriesPNG draws one coloured line per series (x = seconds) with a
// legend, and a vertical dashed line per marker, and writes an 8x4 inch PNG to
// path, creating parent directories. The y axis starts at zero unless data is
// negative. Non-finite points are skipped.
func WriteTimeSeriesPNG(path, title, yLabel string, series []Series, markers []Marker) error {
	if path == "" {
		return errors.New("experiments: plot: empty output path")
	}
	if len(series) == 0 {
		return errors.New("experiments: plot: no series")
	}
	p, err := newTimeSeriesPlot(title, yLabel, series, markers, true)
	if err != nil {
		return err
	}
	wt, err := p.WriterTo(plotWidth, plotHeight, "png")
	if err != nil {
		return fmt.Errorf("experiments: plot: %w", err)
	}
	return writeFileAtomic(path, wt)
}

// newTimeSeriesPlot builds the chart WriteTimeSeriesPNG draws; markers are
// labelled only if labelMarkers.
func newTimeSeriesPlot(title, yLabel string, series []Series, markers []Marker, labelMarkers bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = yLabel
	p.X.Tick.Marker = secondTicks{}
	p.Y.Tick.Marker = compactTicks{}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())

	entries := 0
	for i, s := range series {
		xys := finiteXYs(s.Points)
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("experiments: plot series %q: %w", s.Label, err)
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		if n := len(plotutil.DefaultColors); i >= n {
			line.Dashes = plotutil.Dashes(i / n)
		}
		p.Add(line)
		if s.Label != "" {
			p.Legend.Add(s.Label, line)
			entries++
		}
	}
	if p.Y.Min <= p.Y.Max { // some data: zero baseline, headroom for labels
		p.Y.Min = min(p.Y.Min, 0)
		// An all-zero series still gets a readable axis of at least 0..1.
		p.Y.Max = max(p.Y.Max, p.Y.Min+1)
		p.Y.Max += legendHeadroom(entries) * (p.Y.Max - p.Y.Min)
	}
	if !labelMarkers {
		unlabelled := make([]Marker, len(markers))
		for i, m := range markers {
			unlabelled[i] = Marker{Sec: m.Sec}
		}
		markers = unlabelled
	}
	if err := addMarkers(p, markers); err != nil {
		return nil, err
	}
	return p, nil
}

// legendHeadroom is how much to raise the y axis's top, as a share of the
// data's range, so that a top legend of n entries sits above flat series
// that run near their maximum (a sink at its offered rate) instead of over
// them: each entry takes about 6 % of the plot's height.
func legendHeadroom(n int) float64 {
	f := min(0.02+0.06*float64(max(n, 1)), 0.5) // share of the axis the legend covers
	return f / (1 - f)
}

// writeFileAtomic writes w to a temporary file next to path and renames it
// into place, creating parent directories, so a reader never sees half a
// PNG.
func writeFileAtomic(path string, w io.WriterTo) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("experiments: plot: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plot-*.png")
	if err != nil {
		return fmt.Errorf("experiments: plot: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := w.WriteTo(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("experiments: plot: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("experiments: plot: writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("experiments: plot: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("experiments: plot: %w", err)
	}
	return nil
}

func finiteXYs(pts []metrics.Point) plotter.XYs {
	xys := make(plotter.XYs, 0, len(pts))
	for _, pt := range pts {
		if isFinite(pt.Sec) && isFinite(pt.Value) {
			xys = append(xys, plotter.XY{X: pt.Sec, Y: pt.Value})
		}
	}
	return xys
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// maxMarkerLevels is how many heights marker labels are staggered over.
const maxMarkerLevels = 6

// addMarkers draws the markers as grey dashed vertical lines spanning the
// data's y range, labelled near the top (staggered so close labels don't
// overlap).
func addMarkers(p *plot.Plot, markers []Marker) error {
	var ms []Marker
	for _, m := range markers {
		if isFinite(m.Sec) {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil
	}
	ymin, ymax := p.Y.Min, p.Y.Max
	if ymin > ymax { // no data drawn yet
		ymin, ymax = 0, 1
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	grey := color.Gray{Y: 90}
	levels := markerLabelLevels(ms)
	var lab plotter.XYLabels
	for i, m := range ms {
		line, err := plotter.NewLine(plotter.XYs{{X: m.Sec, Y: ymin}, {X: m.Sec, Y: ymax}})
		if err != nil {
			return fmt.Errorf("experiments: plot marker %q: %w", m.Label, err)
		}
		line.Color = grey
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(line)
		if m.Label != "" {
			y := ymax - float64(levels[i])*(ymax-ymin)*0.07
			lab.XYs = append(lab.XYs, plotter.XY{X: m.Sec, Y: y})
			lab.Labels = append(lab.Labels, m.Label)
		}
	}
	if len(lab.Labels) == 0 {
		return nil
	}
	labels, err := plotter.NewLabels(lab)
	if err != nil {
		return fmt.Errorf("experiments: plot marker labels: %w", err)
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Color = grey
		labels.TextStyle[i].YAlign = draw.YTop
		labels.TextStyle[i].Font.Size = vg.Points(8)
	}
	labels.Offset = vg.Point{X: vg.Points(3)}
	p.Add(labels)
	return nil
}

// markerLabelLevels gives each labelled marker the height level its label
// is drawn at, 0 at the top (-1 for an unlabelled one): one level per
// label, up to maxMarkerLevels. With three levels, a comparison's fourth
// marker (the last protocol done, seconds after the start) was written over
// the "reconfiguration start" label.
func markerLabelLevels(ms []Marker) []int {
	levels := make([]int, len(ms))
	n := 0
	for i, m := range ms {
		if m.Label == "" {
			levels[i] = -1
			continue
		}
		levels[i] = n % maxMarkerLevels
		n++
	}
	return levels
}
