package experiments

import (
	"errors"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Panel is one chart of a stacked figure: its lines and y axis label.
type Panel struct {
	YLabel string
	Series []Series
}

// WriteStackedTimeSeriesPNG draws the panels one above the other on a
// shared time axis (each with its own y scale, so a small quantity is not
// flattened by a large one), title over the first, the markers in every
// panel (labelled in the first), and writes an 8-inch-wide PNG. Line i has
// the same colour in every panel.
func WriteStackedTimeSeriesPNG(path, title string, panels []Panel, markers []Marker) error {
	if path == "" {
		return errors.New("experiments: plot: empty output path")
	}
	if len(panels) == 0 {
		return errors.New("experiments: plot: no panels")
	}
	plots := make([][]*plot.Plot, len(panels))
	xmin, xmax := 0.0, 0.0
	for i, pn := range panels {
		if len(pn.Series) == 0 {
			return fmt.Errorf("experiments: plot %s: panel %d (%s) has no series", path, i+1, pn.YLabel)
		}
		t := ""
		if i == 0 {
			t = title
		}
		p, err := newTimeSeriesPlot(t, pn.YLabel, pn.Series, markers, i == 0)
		if err != nil {
			return err
		}
		if i < len(panels)-1 {
			p.X.Label.Text = ""
		}
		if i == 0 || p.X.Min < xmin {
			xmin = p.X.Min
		}
		if i == 0 || p.X.Max > xmax {
			xmax = p.X.Max
		}
		plots[i] = []*plot.Plot{p}
	}
	for _, row := range plots {
		row[0].X.Min, row[0].X.Max = xmin, xmax
	}
	img := vgimg.New(plotWidth, plotHeight*vg.Length(len(panels))*3/4)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(6)}
	canvases := plot.Align(plots, tiles, dc)
	for i, row := range plots {
		row[0].Draw(canvases[i][0])
	}
	return writeFileAtomic(path, vgimg.PngCanvas{Canvas: img})
}
